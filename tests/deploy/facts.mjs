// facts.mjs -- what scripts/deploy-check.sh checks against a running server,
// read from one rendered kustomization (`kubectl kustomize DIR > FILE.yaml`).
//
//   node tests/deploy/facts.mjs FILE.yaml OUTDIR
//
// Writes the configuration file held by the ConfigMap (its key
// attention.conf) to OUTDIR/attention.conf and prints one line per fact,
// fields separated by single spaces:
//   config OUTDIR/attention.conf
//   probe  Kind/name container startupProbe|livenessProbe|readinessProbe PATH PORT
//   scrape Kind/name PATH PORT       (prometheus.io/* or prometheus.kserve.io/*
//                                     annotations; ServiceMonitor endpoints)
//   target Service/name PORTNAME PORT (each Service port's targetPort)
//   grpc   Kind/name container PORT  (a container port named grpc, or h2c as
//                                     KServe names a gRPC port)
//   pod    Kind/name GRACE PRESTOP   (terminationGracePeriodSeconds, 30 when
//                                     unset as in Kubernetes; the longest
//                                     preStop sleep of its containers, 0 when
//                                     none)
//   override Kind/name container SETTING  (an ATTN_PORT, ATTN_GRPC_PORT or
//                                     ATTN_DRAIN_TIMEOUT variable, or a
//                                     --port, --grpc-port or --drain-timeout
//                                     argument: it would beat the file, where
//                                     the check reads those three)
// A named port is resolved to its containerPort; a port or preStop hook it
// cannot work out is printed as "?", which the script reports.
// Exits 1 when the file has no such ConfigMap or more than one.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const [file, outdir] = process.argv.slice(2);
if (!file || !outdir) {
  console.error("usage: facts.mjs FILE.yaml OUTDIR");
  process.exit(2);
}
const docs = parseAllDocuments(readFileSync(file, "utf8"))
  .map((d) => d.toJS())
  .filter((d) => d && typeof d === "object");
const id = (d) => `${d.kind}/${d.metadata && d.metadata.name}`;

// The pod spec of each kind that has one, with the metadata its pods get.
function podOf(d) {
  switch (d.kind) {
    case "Deployment":
    case "StatefulSet":
    case "DaemonSet":
    case "Job":
      return { spec: d.spec.template.spec, meta: d.spec.template.metadata || {} };
    case "Pod":
      return { spec: d.spec, meta: d.metadata };
    case "InferenceService": // a custom predictor inlines a PodSpec
      return { spec: d.spec.predictor, meta: d.metadata };
    default:
      return null;
  }
}
const pods = docs.map((d) => ({ d, pod: podOf(d) })).filter((x) => x.pod);

// A port as written (number or name) to a number, by the containers' ports.
function resolve(port, containers) {
  if (Number.isInteger(port)) return String(port);
  if (typeof port === "string" && /^[0-9]+$/.test(port)) return port;
  for (const c of containers)
    for (const p of c.ports || []) if (p.name === port) return String(p.containerPort);
  return "?";
}
const allContainers = pods.flatMap(({ pod }) => pod.spec.containers || []);

// seconds of a preStop hook that only sleeps; "?" for anything else.
function preStopSeconds(c) {
  const h = c.lifecycle && c.lifecycle.preStop;
  if (!h) return 0;
  if (h.sleep && Number.isInteger(h.sleep.seconds)) return h.sleep.seconds;
  const cmd = h.exec && h.exec.command;
  if (Array.isArray(cmd) && cmd.length === 2 && /^(\/bin\/|\/usr\/bin\/)?sleep$/.test(cmd[0]) &&
      /^[0-9]+$/.test(String(cmd[1])))
    return Number(cmd[1]);
  return "?";
}

const lines = [];

const confs = docs.filter((d) => d.kind === "ConfigMap" && d.data && "attention.conf" in d.data);
if (confs.length !== 1) {
  console.error(`facts.mjs: ${file}: ${confs.length} ConfigMaps with the key attention.conf, not one`);
  process.exit(1);
}
mkdirSync(outdir, { recursive: true });
writeFileSync(`${outdir}/attention.conf`, confs[0].data["attention.conf"]);
lines.push(`config ${outdir}/attention.conf`);

for (const { d, pod } of pods) {
  const containers = pod.spec.containers || [];
  for (const c of containers)
    for (const kind of ["startupProbe", "livenessProbe", "readinessProbe"]) {
      const g = c[kind] && c[kind].httpGet;
      if (g) lines.push(`probe ${id(d)} ${c.name} ${kind} ${g.path || "/"} ${resolve(g.port, containers)}`);
    }
  const a = pod.meta.annotations || {};
  for (const pre of ["prometheus.io", "prometheus.kserve.io"])
    if (a[`${pre}/port`] || a[`${pre}/path`])
      lines.push(`scrape ${id(d)} ${a[`${pre}/path`] || "/metrics"} ${resolve(a[`${pre}/port`], containers)}`);
  for (const c of containers) {
    for (const e of c.env || [])
      if (["ATTN_PORT", "ATTN_GRPC_PORT", "ATTN_DRAIN_TIMEOUT"].includes(e.name))
        lines.push(`override ${id(d)} ${c.name} ${e.name}`);
    for (const a of [...(c.command || []), ...(c.args || [])])
      if (/^--(port|grpc-port|drain-timeout)(=|$)/.test(a)) lines.push(`override ${id(d)} ${c.name} ${a}`);
    for (const p of c.ports || [])
      if (p.name === "grpc" || p.name === "h2c") lines.push(`grpc ${id(d)} ${c.name} ${p.containerPort}`);
  }
  const grace = pod.spec.terminationGracePeriodSeconds ?? 30;
  const stops = containers.map(preStopSeconds);
  const stop = stops.includes("?") ? "?" : Math.max(0, ...stops);
  lines.push(`pod ${id(d)} ${grace} ${stop}`);
}

const services = docs.filter((d) => d.kind === "Service");
for (const s of services)
  for (const p of s.spec.ports || [])
    lines.push(`target ${id(s)} ${p.name || p.port} ${resolve(p.targetPort ?? p.port, allContainers)}`);

for (const m of docs.filter((d) => d.kind === "ServiceMonitor"))
  for (const e of m.spec.endpoints || []) {
    const sp = services.flatMap((s) => s.spec.ports || []).find((p) => p.name === e.port);
    const port = sp ? resolve(sp.targetPort ?? sp.port, allContainers) : "?";
    lines.push(`scrape ${id(m)} ${e.path || "/metrics"} ${port}`);
  }

console.log(lines.join("\n"));
