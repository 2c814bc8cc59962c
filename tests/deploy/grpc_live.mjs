// grpc_live.mjs -- scripts/deploy-check.sh's look at the gRPC port: calls
// ServerLive and ServerReady (proto/grpc_service.proto) on HOST:PORT, plain
// HTTP/2, and prints "live true ready true"; exits 1 on any failure.
//
//   node tests/deploy/grpc_live.mjs 127.0.0.1:PORT
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import { fileURLToPath } from "node:url";

const target = process.argv[2];
if (!target) {
  console.error("usage: grpc_live.mjs HOST:PORT");
  process.exit(2);
}
const proto = fileURLToPath(new URL("../../proto/grpc_service.proto", import.meta.url));
const { inference } = grpc.loadPackageDefinition(
  protoLoader.loadSync(proto, { keepCase: true, longs: String, defaults: true }));
const client = new inference.GRPCInferenceService(target, grpc.credentials.createInsecure());
const call = (method) => new Promise((resolve, reject) =>
  client[method]({}, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res))));
try {
  const live = await call("ServerLive");
  const ready = await call("ServerReady");
  console.log(`live ${live.live} ready ${ready.ready}`);
  process.exit(live.live && ready.ready ? 0 : 1);
} catch (err) {
  console.error(`grpc_live.mjs: ${target}: ${grpc.status[err.code] ?? ""} ${err.details ?? err.message}`);
  process.exit(1);
}
