// Calls roformer serve at BASE with the official JS clients, pinned in
// package.json: OpenAI's (at BASE/v1, as OpenAI's base URL) and Hugging
// Face's @huggingface/inference (endpointUrl = BASE, the server's root).
// It runs the calls of each GROUP named and prints one JSON object, a
// result per call (a client's error becomes {"error": message}); the Go
// test server/jsclients_test.go compares them with the native routes.
//
//	node clients.mjs BASE GROUP...
//
// GROUP: embed (a base encoder), classify (a sequence classifier),
// fill-mask, token-classification, question-answering.
import OpenAI from "openai";
import { InferenceClient } from "@huggingface/inference";

const [base, ...groups] = process.argv.slice(2);
if (!base || groups.length === 0) {
  console.error("usage: node clients.mjs BASE GROUP...");
  process.exit(2);
}

const openai = new OpenAI({ baseURL: base + "/v1", apiKey: "none", maxRetries: 0 });
const hf = new InferenceClient().endpoint(base);

// floats reads OpenAI's base64 embedding: little-endian float32 bytes.
function floats(b64) {
  const buf = Buffer.from(b64, "base64");
  const out = [];
  for (let i = 0; i + 4 <= buf.length; i += 4) out.push(buf.readFloatLE(i));
  return out;
}

const calls = {
  embed: {
    // The client asks for base64 and decodes it itself when no encoding_format is given.
    openai_default: async () =>
      (await openai.embeddings.create({ model: "m", input: ["the whale", "a ship"] })).data.map((d) => d.embedding),
    openai_float: async () =>
      (await openai.embeddings.create({ model: "m", input: ["the whale", "a ship"], encoding_format: "float" })).data.map((d) => d.embedding),
    openai_base64: async () =>
      (await openai.embeddings.create({ model: "m", input: ["the whale", "a ship"], encoding_format: "base64" })).data.map((d) => floats(d.embedding)),
    openai_dimensions: async () =>
      (await openai.embeddings.create({ model: "m", input: "the whale", dimensions: 8, encoding_format: "float" })).data.map((d) => d.embedding),
    hf_feature_extraction: () => hf.featureExtraction({ inputs: ["the whale", "a ship"] }),
    hf_feature_extraction_one: () => hf.featureExtraction({ inputs: "the whale" }),
    hf_sentence_similarity: () =>
      hf.sentenceSimilarity({ inputs: { source_sentence: "the whale", sentences: ["the sea", "a ship ."] } }),
  },
  classify: {
    hf_text_classification: () => hf.textClassification({ inputs: "the whale" }),
    // The client's type is one string; a batch is sent as the API takes it, and the client keeps the first text's labels.
    hf_text_classification_batch: () => hf.textClassification({ inputs: ["a ship .", "the whale"] }),
    hf_text_classification_top_k: () => hf.textClassification({ inputs: "the whale", parameters: { top_k: 1 } }),
    hf_sentence_similarity: () =>
      hf.sentenceSimilarity({ inputs: { source_sentence: "the whale", sentences: ["the sea", "a ship ."] } }),
  },
  "fill-mask": {
    hf_fill_mask: () => hf.fillMask({ inputs: "the [MASK] sea ." }),
    hf_fill_mask_top_k: () => hf.fillMask({ inputs: "a ship [MASK] the sea", parameters: { top_k: 3 } }),
  },
  "token-classification": {
    hf_token_classification: () => hf.tokenClassification({ inputs: "the whale ship sea" }),
    hf_token_classification_first: () =>
      hf.tokenClassification({ inputs: "the whale ship sea", parameters: { aggregation_strategy: "first", ignore_labels: [] } }),
  },
  "question-answering": {
    hf_question_answering: () =>
      hf.questionAnswering({ inputs: { question: "the whale", context: "a ship the sea ." } }),
    hf_question_answering_top_k: () =>
      hf.questionAnswering({ inputs: { question: "the whale", context: "a ship the sea ." }, parameters: { top_k: 2 } }),
    // endpointUrl on the call, as the client's docs show it, rather than on the client.
    hf_question_answering_endpoint_url: () =>
      new InferenceClient().questionAnswering({ endpointUrl: base, inputs: { question: "a ship", context: "the whale ." } }),
  },
};

const out = {};
for (const g of groups) {
  if (!calls[g]) {
    console.error(`unknown group ${g}; want one of ${Object.keys(calls).join(", ")}`);
    process.exit(2);
  }
  for (const [name, fn] of Object.entries(calls[g])) {
    try {
      out[name] = await fn();
    } catch (e) {
      out[name] = { error: `${e.name}: ${e.message}` };
    }
  }
}
console.log(JSON.stringify(out));
