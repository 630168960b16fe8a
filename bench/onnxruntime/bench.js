#!/usr/bin/env node
// The ONNX Runtime twin of `roformer bench --mode infer`: the same job, the same sizes, the same JSON
// keys as bench/pytorch/bench.py.
//
//   node bench/onnxruntime/bench.js --size base --batch 8 --seq 128 --threads 2 --json
//
// The model is bench/pytorch/roformer_torch.py's RoFormerForMaskedLM exported to ONNX by export.py
// (opset 13, dynamic batch and sequence; the same random weights as bench.py --size S --seed N).
// Without --onnx, bench.js runs export.py under /usr/bin/python3, which reuses a checked export
// from its cache folder or exports and checks a new one (minutes for base, once).
//
// One step: InferenceSession.run of the ids [B, T] (int64, random, fixed seed, no padding) into the
// full [B, T, V] MLM logits, written into an output tensor allocated once (as the Go side reuses its
// outputs). Session options: graphOptimizationLevel 'all' (ORT's fusions: LayerNorm, GELU, MatMul+Add,
// ...), intraOpNumThreads = --threads (the calling thread and threads-1 pool threads), interOpNumThreads
// 1 and executionMode 'sequential' (one operator at a time, each on all threads), the CPU execution
// provider (ORT's own MLAS kernels; no BLAS). ORT's defaults are kept otherwise: its memory arena and
// memory patterns, and spinning pool threads (one pool only, so nothing else competes for the cores).
//
// Only inference, only fp32: --mode train and --precision int8 exit with status 2.
//
// Also: node bench.js --check MANIFEST, used by export.py: runs the cases of MANIFEST (ids and PyTorch's
// logits as raw files) and prints the largest absolute difference of each as one JSON line.
'use strict';

const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const HERE = __dirname;
const PYTHON = '/usr/bin/python3'; // Debian's python3-torch lives here, not in the default pyenv python

function usage(msg) {
  process.stderr.write(`bench.js: ${msg}\n`);
  process.exit(2);
}

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    process.stderr.write(`bench.js: cannot load onnxruntime-node (${e.message.split('\n')[0]}); ` +
      `run npm ci in ${HERE} (see README.md)\n`);
    process.exit(1);
  }
}

// Flags: --name value or --name=value; the boolean ones take no value.
const FLAGS = {
  size: '', model: '', head: 'masked-lm', mode: 'infer', precision: 'fp32', batch: '8', seq: '128',
  threads: '', steps: '5', warmup: '1', 'peak-gflops': '0', seed: '1', onnx: '', cache: '', check: '',
};
const BOOLS = new Set(['json', 'quiet']);

function parseArgs(argv) {
  const o = { ...FLAGS, json: false, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) usage(`unexpected argument ${JSON.stringify(arg)}`);
    let [name, value] = arg.slice(2).split(/=(.*)/s);
    if (BOOLS.has(name)) {
      if (value !== undefined) usage(`--${name} takes no value`);
      o[name] = true;
      continue;
    }
    if (!(name in FLAGS)) usage(`unknown flag --${name} (flags: ${[...Object.keys(FLAGS), ...BOOLS].map((f) => '--' + f).join(' ')})`);
    if (value === undefined) {
      if (i + 1 >= argv.length) usage(`--${name} needs a value`);
      value = argv[++i];
    }
    o[name] = value;
  }
  if (o.check) return o;
  const ints = {};
  for (const k of ['batch', 'seq', 'steps', 'warmup', 'seed']) {
    if (!/^\d+$/.test(o[k])) usage(`--${k} ${JSON.stringify(o[k])} is not a whole number`);
    ints[k] = Number(o[k]);
  }
  Object.assign(o, ints);
  o.threads = o.threads === '' ? require('os').availableParallelism() : Number(o.threads);
  o.peakGflops = Number(o['peak-gflops']);
  if (!Number.isInteger(o.threads) || o.threads < 1) usage('--threads must be a whole number >= 1');
  if (o.batch < 1 || o.seq < 1 || o.steps < 1) usage('--batch, --seq and --steps must be at least 1');
  if (!(o.peakGflops >= 0) || !Number.isFinite(o.peakGflops)) usage('--peak-gflops must be a finite number >= 0');
  if (o.model) usage('--model is not supported: ONNX Runtime runs the --size presets exported by export.py');
  if (!['tiny', 'small', 'base'].includes(o.size)) usage('--size tiny|small|base is required');
  if (o.mode === 'train') usage('--mode train: ONNX Runtime only does inference here (its training API is a separate build)');
  if (o.mode !== 'infer') usage(`unknown --mode ${JSON.stringify(o.mode)} (valid: infer)`);
  if (o.head !== 'masked-lm') usage(`--head ${JSON.stringify(o.head)}: the exported model ends in the MLM head (masked-lm)`);
  if (o.precision !== 'fp32') usage(`--precision ${JSON.stringify(o.precision)}: only fp32 (no quantized model is exported)`);
  return o;
}

// The session options of every ONNX Runtime session here (benchmark, probe and check alike).
function sessionOptions(threads) {
  return {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    logSeverityLevel: 3, // errors only
  };
}

// splitmix64 as a source of uniform integers in [lo, hi): the ids only need to be fixed and valid.
function rng(seed) {
  let s = BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n + 0x62656e6368n);
  return (lo, hi) => {
    s = BigInt.asUintN(64, s + 0x9e3779b97f4a7c15n);
    let z = s;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    z ^= z >> 31n;
    return lo + Number(z % BigInt(hi - lo));
  };
}

// Matrix-product FLOPs of one forward pass: model_flops of roformer_torch.py and modelFLOPs of
// cmd/roformer/cmd_bench.go (projection, q/k/v/output, feed-forward, q k^T and probs v, LM head).
function modelFlops(c, B, T, headRows) {
  const E = c.embedding, H = c.hidden, I = c.intermediate, V = c.vocab;
  const bt = B * T;
  let f = E !== H ? 2 * bt * E * H : 0;
  f += c.layers * (4 * 2 * bt * H * H + 2 * 2 * bt * H * I + 2 * 2 * B * T * T * H);
  f += 2 * headRows * H * E + 2 * headRows * E * V;
  return f;
}

function peakRss() {
  return process.resourceUsage().maxRSS * 1024; // KiB on Linux
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

function now() {
  return Number(process.hrtime.bigint()) / 1e6; // ms
}

// The exported model for --size/--seed that can run --seq: --onnx, or export.py's (cached) export.
function findModel(o) {
  if (o.onnx) return o.onnx;
  const args = [path.join(HERE, 'export.py'), '--size', o.size, '--seed', String(o.seed),
    '--max-seq', String(Math.max(4096, o.seq)), '--threads', String(o.threads), '--node', process.execPath];
  if (o.cache) args.push('--cache', o.cache);
  const p = spawnSync(PYTHON, args, { stdio: ['ignore', 'pipe', o.quiet ? 'pipe' : 'inherit'], encoding: 'utf8' });
  const lines = (p.stdout || '').trim().split('\n');
  if (p.status !== 0 || !lines[lines.length - 1]) {
    const why = p.error ? p.error.message : `exit ${p.status}${o.quiet && p.stderr ? ': ' + p.stderr.trim().split('\n').slice(-2).join(' | ') : ''}`;
    process.stderr.write(`bench.js: export.py failed (${why})\n`);
    process.exit(1);
  }
  return lines[lines.length - 1];
}

// The SGEMM probe: [threads*512, 1024] x [1024, 1024] through ORT's MatMul (MLAS), the same work as the
// Go and PyTorch probes; the best round of ~0.4 s (at least 3 rounds, at most 50).
async function probePeak(ort, probePath, threads) {
  const s = await ort.InferenceSession.create(probePath, sessionOptions(threads));
  const M = threads * 512, K = 1024, N = 1024;
  const r = rng(7);
  const a = new Float32Array(M * K).map(() => r(0, 1 << 20) / (1 << 20) - 0.5);
  const b = new Float32Array(K * N).map(() => r(0, 1 << 20) / (1 << 20) - 0.5);
  const feeds = { a: new ort.Tensor('float32', a, [M, K]), b: new ort.Tensor('float32', b, [K, N]) };
  const fetches = { c: new ort.Tensor('float32', new Float32Array(M * N), [M, N]) };
  await s.run(feeds, fetches);
  let best = Infinity, reps = 0;
  const end = now() + 400;
  while (reps < 3 || (now() < end && reps < 50)) {
    const t0 = now();
    await s.run(feeds, fetches);
    best = Math.min(best, now() - t0);
    reps++;
  }
  await s.release();
  const flops = 2 * M * K * N;
  return [flops / (best / 1e3) / 1e9, `measured: best of ${reps} rounds of ONNX Runtime MatMul [${M}x${K}]x[${K}x${N}] on ${threads} threads`];
}

async function bench(o) {
  const startRss = peakRss();
  const ort = loadOrt();
  const onnxPath = findModel(o);
  const metaPath = onnxPath.replace(/\.onnx$/, '.json');
  if (!fs.existsSync(metaPath)) usage(`${metaPath} is missing: give an --onnx written by export.py (it writes the .json beside it)`);
  const meta = JSON.parse(fs.readFileSync(metaPath, 'utf8'));
  if (meta.size !== o.size) usage(`${onnxPath} is size ${meta.size}, not ${o.size}`);
  if (o.seq > meta.max_seq) usage(`--seq ${o.seq} is longer than the ${meta.max_seq} rows of the exported rotary table: export again with export.py --max-seq ${o.seq}`);
  const c = meta.config;
  const B = o.batch, T = o.seq, BT = B * T;
  const headRows = BT;
  const flops = modelFlops(c, B, T, headRows);

  let peak = o.peakGflops, peakSource = 'given (--peak-gflops)';
  if (!peak) [peak, peakSource] = await probePeak(ort, meta.probe, o.threads);

  const opts = sessionOptions(o.threads);
  const tLoad = now();
  const session = await ort.InferenceSession.create(onnxPath, opts);
  const loadMs = now() - tLoad;
  if (!o.quiet) {
    process.stderr.write(`onnxruntime bench: ${o.size} ${o.head} ${o.mode}, batch ${B} x seq ${T}, ${o.threads} threads; ` +
      `${(meta.params / 1e6).toFixed(1)}M parameters; session created in ${loadMs.toFixed(0)} ms\n`);
  }

  const r = rng(o.seed);
  const lo = Math.min(5, c.vocab - 1);
  const ids = new BigInt64Array(BT);
  for (let i = 0; i < BT; i++) ids[i] = BigInt(r(lo, c.vocab));
  const feeds = { input_ids: new ort.Tensor('int64', ids, [B, T]) };
  const fetches = { logits: new ort.Tensor('float32', new Float32Array(BT * c.vocab), [B, T, c.vocab]) };
  const step = () => session.run(feeds, fetches);

  for (let i = 0; i < o.warmup; i++) await step();
  const times = [];
  for (let i = 0; i < o.steps; i++) {
    const t0 = now();
    await step();
    times.push(now() - t0);
    if (!o.quiet) process.stderr.write(`  step ${i + 1}/${o.steps}: ${times[i].toFixed(1)} ms\n`);
  }
  // The output tensor was written (it starts as zeros) and is finite: a look at the last token's row.
  const last = fetches.logits.data.subarray((BT - 1) * c.vocab);
  if (!last.every(Number.isFinite) || !last.some((x) => x !== 0)) {
    process.stderr.write('bench.js: the logits of the last token are not finite, or all zero: ONNX Runtime did not fill the output\n');
    process.exit(1);
  }
  const med = median(times);
  const res = {
    impl: 'onnxruntime', mode: o.mode, size: o.size, head: o.head, precision: o.precision, batch: B, seq: T,
    threads: o.threads, blas: `onnxruntime-node ${ort.env.versions.node} (CPU execution provider, MLAS kernels)`,
    quant_engine: null, int8_vs_fp32: null, params: meta.params, steps: o.steps, warmup: o.warmup,
    tokens_per_sec: BT / (med / 1e3), ms_per_step: med, ms_min: Math.min(...times), ms_max: Math.max(...times), ms_steps: times,
    flops_per_step: flops, gflops: flops / (med / 1e3) / 1e9, peak_gflops: peak, peak_source: peakSource,
    mfu: 0, peak_rss_bytes: peakRss(), start_rss_bytes: startRss, end_rss_bytes: process.memoryUsage.rss(), head_rows: headRows,
    // No environment variable sets ONNX Runtime's threads (the session options do); none are recorded.
    env: {}, session_options: opts, session_create_ms: loadMs, node: process.version,
    onnx: { file: onnxPath, opset: meta.opset, exported_by: `torch ${meta.torch}`, max_abs_diff: meta.max_abs_diff },
    note: 'inference: InferenceSession.run into a preallocated [B,T,V] logits tensor, full [B,T,V] logits; ' +
      'FLOPs count only matrix products (2*M*N*K, attention QK^T and PV included)',
  };
  res.mfu = res.gflops / peak;
  if (T > c.max_position_embeddings) {
    res.note += `; seq ${T} > max_position_embeddings ${c.max_position_embeddings}: rotary table extended (HF would refuse)`;
  }
  const pct = (x) => (100 * x).toFixed(1);
  console.log(`job:        ${o.size} ${o.head} ${o.mode}, batch ${B} x seq ${T}, ${o.threads} threads, ${res.blas}`);
  console.log(`steps:      ${o.steps} timed after ${o.warmup} warm-up: median ${med.toFixed(1)} ms (min ${res.ms_min.toFixed(1)}, ` +
    `max ${res.ms_max.toFixed(1)}, spread ${pct((res.ms_max - res.ms_min) / med)}%)`);
  console.log(`throughput: ${res.tokens_per_sec.toFixed(1)} tokens/s, ${res.gflops.toFixed(2)} GFLOP/s (${(flops / 1e9).toPrecision(3)} GFLOP per step)`);
  console.log(`MFU:        ${pct(res.mfu)}% of ${peak.toFixed(1)} GFLOP/s, ${peakSource}`);
  console.log(`peak RSS:   ${(res.peak_rss_bytes / 2 ** 20).toFixed(1)} MiB (${(startRss / 2 ** 20).toFixed(1)} MiB at start, ` +
    `${(res.end_rss_bytes / 2 ** 20).toFixed(1)} MiB after the last step)`);
  console.log(`session:    ${JSON.stringify(opts)}`);
  console.log(`note:       ${res.note}`);
  if (o.json) console.log(JSON.stringify(res));
  await session.release();
}

// export.py's check: the logits of each case against PyTorch's, largest absolute difference.
async function check(manifestPath) {
  const ort = loadOrt();
  const m = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  const session = await ort.InferenceSession.create(m.model, sessionOptions(m.threads));
  const out = { ort_version: ort.env.versions.node, cases: [] };
  for (const c of m.cases) {
    const raw = fs.readFileSync(c.ids);
    const ids = new BigInt64Array(raw.buffer, raw.byteOffset, raw.byteLength / 8);
    const want = fs.readFileSync(c.logits);
    const ref = new Float32Array(want.buffer, want.byteOffset, want.byteLength / 4);
    const got = (await session.run({ input_ids: new ort.Tensor('int64', ids, [c.batch, c.seq]) })).logits;
    if (got.dims.join(',') !== [c.batch, c.seq, c.vocab].join(',')) {
      throw new Error(`logits of shape [${got.dims}], want [${c.batch}, ${c.seq}, ${c.vocab}]`);
    }
    let worst = 0;
    for (let i = 0; i < ref.length; i++) {
      const d = Math.abs(got.data[i] - ref[i]);
      if (!(d <= worst)) worst = Number.isNaN(d) ? NaN : d; // NaN sticks
      if (Number.isNaN(worst)) break;
    }
    out.cases.push({ batch: c.batch, seq: c.seq, max_abs_diff: worst });
  }
  await session.release();
  console.log(JSON.stringify(out));
}

const opts = parseArgs(process.argv.slice(2));
(opts.check ? check(opts.check) : bench(opts)).catch((e) => {
  process.stderr.write(`bench.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
