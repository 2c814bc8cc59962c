// grpc_client.mjs -- a client of the service's Open Inference Protocol over
// gRPC, in Node with @grpc/grpc-js and @grpc/proto-loader (the npm packages
// of package.json; `npm ci` installs them), reading the service from
// proto/grpc_service.proto at run time.
//
//     node examples/grpc_client.mjs localhost:8001
//
// 1. ModelInfer on the built-in model "attention": the query (3 rows of 4)
//    as raw little-endian FP32 bytes (raw_input_contents), num_heads and
//    is_causal as request parameters; prints the output tensor, which comes
//    back raw too (raw_output_contents, one entry per output).
// 2. ModelStreamInfer: a sequence of three steps on one stream, answered in
//    order: the start (two rows), a step that is refused (num_heads 3 does
//    not divide 4: a stream message with error_message, and the stream goes
//    on), and the last step (sequence_end). Prints each answer's
//    cache_length or error.
// Exits 1 when a call fails otherwise than the one refusal it expects.
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import { fileURLToPath } from "node:url";

const target = process.argv[2] || "localhost:8001";
const proto = fileURLToPath(new URL("../proto/grpc_service.proto", import.meta.url));
// keepCase: the protocol's field names as written (raw_input_contents);
// longs as strings, so that 64-bit values stay exact
const def = protoLoader.loadSync(proto, { keepCase: true, longs: String, defaults: true });
const { inference } = grpc.loadPackageDefinition(def);
const client = new inference.GRPCInferenceService(target, grpc.credentials.createInsecure());

// Rows of numbers as one raw FP32 tensor: little-endian bytes, row-major.
function fp32(rows) {
  const flat = rows.flat();
  const b = Buffer.alloc(4 * flat.length);
  flat.forEach((x, i) => b.writeFloatLE(x, 4 * i));
  return b;
}
// A raw FP32 tensor as numbers, each printed with the fewest digits that
// read back as the same float32 (as the server's JSON answers print them).
function floats(b) {
  return Array.from({ length: b.length / 4 }, (_, i) => {
    const x = b.readFloatLE(4 * i);
    for (let p = 1; p < 9; p++)
      if (Math.fround(Number(x.toPrecision(p))) === x) return Number(x.toPrecision(p));
    return x;
  });
}
function request(rows, parameters) {
  return {
    model_name: "attention",
    parameters,
    inputs: [{ name: "query", datatype: "FP32", shape: [rows.length, rows[0].length] }],
    raw_input_contents: [fp32(rows)],
  };
}
function fail(what, err) {
  console.error(`${what}: ${err.code !== undefined ? grpc.status[err.code] + ": " : ""}${err.details || err.message}`);
  process.exit(1);
}

// 1. one call
const answer = await new Promise((resolve, reject) =>
  client.ModelInfer(
    request([[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
            { num_heads: { int64_param: 2 }, is_causal: { bool_param: true } }),
    { deadline: Date.now() + 10000 },
    (err, res) => (err ? reject(err) : resolve(res))),
).catch((err) => fail("ModelInfer", err));
answer.outputs.forEach((o, i) =>
  console.log(`${o.name} ${o.datatype} [${o.shape.join(", ")}]: ${floats(answer.raw_output_contents[i]).join(" ")}`));

// 2. a sequence over one stream
const steps = [
  request([[1, 0, 0, 1], [0, 2, 1, 0]], { num_heads: { int64_param: 2 },
    sequence_id: { string_param: "grpc-example-seq" }, sequence_start: { bool_param: true } }),
  request([[1, 1, 0, 0]], { num_heads: { int64_param: 3 },
    sequence_id: { string_param: "grpc-example-seq" } }),
  request([[1, 1, 0, 0]], { num_heads: { int64_param: 2 },
    sequence_id: { string_param: "grpc-example-seq" }, sequence_end: { bool_param: true } }),
];
const stream = client.ModelStreamInfer({ deadline: Date.now() + 10000 });
let n = 0, refused = 0;
stream.on("data", (m) => {
  n += 1;
  if (m.error_message) {
    refused += 1;
    console.log(`step ${n}: refused: ${m.error_message}`);
  } else {
    const r = m.infer_response;
    const out = floats(r.raw_output_contents[0]);
    console.log(`step ${n}: cache_length ${r.parameters.cache_length.int64_param}, ` +
                `output ${out.slice(-4).join(" ")}`);
  }
});
stream.on("error", (err) => fail("ModelStreamInfer", err));
stream.on("end", () => {
  if (n !== steps.length || refused !== 1)
    fail("ModelStreamInfer", new Error(`${n} answers, ${refused} refused; expected 3, 1`));
  client.close();
});
for (const s of steps) stream.write(s);
stream.end();
