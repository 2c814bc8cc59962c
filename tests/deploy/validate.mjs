// validate.mjs -- validates rendered Kubernetes manifests offline, for
// `make deploy-check` (scripts/deploy-check.sh).
//
//   node tests/deploy/validate.mjs FILE.yaml...
//   node tests/deploy/validate.mjs --expect EXPECTED.txt FILE.yaml...
//
// Every document of every FILE is checked:
//   - Kubernetes objects (and the Prometheus Operator's ServiceMonitor)
//     against the schemas of the npm packages kubernetes-models and
//     @kubernetes-models/prometheus-operator: types, enums, required fields;
//   - and for unknown fields, which those schemas let through (their
//     objects do not say additionalProperties: false, and the API server
//     would drop such a field silently, so a typo such as `livenessProbes`
//     would leave the pod without a liveness probe). The packages ship their
//     schemas compiled into validator functions, not as JSON to walk, so the
//     document is handed to the validator through a Proxy that records every
//     field the validator reads: a field of the schema is read (as is every
//     key of a map such as labels, through additionalProperties), so a field
//     of the document that was never read is one the schema does not have;
//   - the KServe InferenceService against tests/deploy/inferenceservice.schema.json,
//     written here for the fields the manifests use (there is no KServe
//     schema package to install), with additionalProperties: false.
// A kind with no schema here is a finding too.
//
// Prints one line per finding, `FILE: Kind/name /json/path: message`, and
// exits 1 when there is one. With --expect, the findings (without FILE) must
// be exactly the lines of EXPECTED.txt (blank lines and '#' comments aside):
// it checks that a deliberately broken set (tests/deploy/broken/) fails, and
// for the reasons meant; it prints what differs and exits 1 otherwise.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import Ajv from "ajv";

const here = new URL(".", import.meta.url);

// apiVersion -> the module whose exports are the kinds of that version.
function modulePath(apiVersion) {
  if (apiVersion.startsWith("monitoring.coreos.com/"))
    return `@kubernetes-models/prometheus-operator/${apiVersion}`;
  return `kubernetes-models/${apiVersion}`;
}

// The document seen through a Proxy that adds to `seen` the JSON path of
// every own field read.
function recording(value, path, seen) {
  if (value === null || typeof value !== "object") return value;
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === "string" && Object.hasOwn(target, key)) {
        const p = `${path}/${key}`;
        seen.add(p);
        return recording(target[key], p, seen);
      }
      return Reflect.get(target, key, receiver);
    },
  });
}

// The JSON paths of the object fields of `value` not in `seen` (array
// indices are not fields: an array's items are walked).
function unread(value, path, seen, out) {
  if (value === null || typeof value !== "object") return out;
  for (const key of Object.keys(value)) {
    const p = `${path}/${key}`;
    if (!Array.isArray(value) && !seen.has(p)) {
      out.push(p);
      continue; // below an unknown field, everything is unknown
    }
    unread(value[key], p, seen, out);
  }
  return out;
}

function ajvMessages(errors) {
  return (errors || []).map((e) => {
    if (e.keyword === "additionalProperties")
      return `${e.instancePath}/${e.params.additionalProperty}: unknown field`;
    let allowed = "";
    if (e.params && e.params.allowedValues) allowed = ` (${e.params.allowedValues.join(", ")})`;
    else if (e.params && "allowedValue" in e.params) allowed = ` (${e.params.allowedValue})`;
    return `${e.instancePath || "/"}: ${e.message}${allowed}`;
  });
}

async function checkKubernetes(doc) {
  let mod;
  try {
    mod = await import(modulePath(doc.apiVersion));
  } catch {
    return [`/apiVersion: no schema for ${doc.apiVersion}`];
  }
  const Model = mod[doc.kind];
  if (typeof Model !== "function" || Model.kind !== doc.kind)
    return [`/kind: no schema for ${doc.kind} in ${doc.apiVersion}`];
  const seen = new Set();
  const found = [];
  try {
    // The model's validate() runs its compiled schema on `this`.
    Model.prototype.validate.call(recording(doc, "", seen));
  } catch (e) {
    if (!e.errors) throw e;
    found.push(...ajvMessages(e.errors));
  }
  for (const p of unread(doc, "", seen, [])) found.push(`${p}: unknown field`);
  return found;
}

const ajv = new Ajv({ allErrors: true });
const crdSchemas = {
  "serving.kserve.io/v1beta1 InferenceService": ajv.compile(
    JSON.parse(readFileSync(new URL("inferenceservice.schema.json", here), "utf8")),
  ),
};

function checkCustom(validate, doc) {
  return validate(doc) ? [] : ajvMessages(validate.errors);
}

async function findings(file) {
  const out = [];
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const [i, d] of docs.entries()) {
    if (d.errors.length) {
      for (const e of d.errors) out.push(`${file} document ${i + 1}: ${e.message}`);
      continue;
    }
    const doc = d.toJS();
    if (doc === null) continue;
    const id = `${doc.kind}/${doc.metadata && doc.metadata.name}`;
    if (typeof doc.apiVersion !== "string" || typeof doc.kind !== "string") {
      out.push(`${id} /: no apiVersion or kind`);
      continue;
    }
    const custom = crdSchemas[`${doc.apiVersion} ${doc.kind}`];
    const msgs = custom ? checkCustom(custom, doc) : await checkKubernetes(doc);
    for (const m of msgs) out.push(`${id} ${m}`);
  }
  return out;
}

const args = process.argv.slice(2);
let expectFile = null;
if (args[0] === "--expect") {
  expectFile = args[1];
  args.splice(0, 2);
}
if (args.length === 0) {
  console.error("usage: validate.mjs [--expect EXPECTED.txt] FILE.yaml...");
  process.exit(2);
}

const all = [];
const located = [];
for (const file of args)
  for (const f of await findings(file)) {
    all.push(f);
    located.push(`${file}: ${f}`);
  }

if (expectFile === null) {
  for (const f of located) console.log(f);
  console.log(`validate.mjs: ${args.join(" ")}: ${all.length ? `${all.length} finding(s)` : "valid"}`);
  process.exit(all.length ? 1 : 0);
}

const expected = readFileSync(expectFile, "utf8")
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith("#"));
const missing = expected.filter((l) => !all.includes(l));
const extra = all.filter((l) => !expected.includes(l));
for (const l of missing) console.log(`expected, not found: ${l}`);
for (const l of extra) console.log(`found, not expected: ${l}`);
if (all.length === 0 || missing.length || extra.length) {
  console.log(`validate.mjs: ${args.join(" ")}: the findings differ from ${expectFile}`);
  process.exit(1);
}
console.log(`validate.mjs: ${args.join(" ")}: rejected, with the ${all.length} findings of ${expectFile}`);
