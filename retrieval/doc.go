// Package retrieval evaluates ranked retrieval: the metrics of
// sentence-transformers' InformationRetrievalEvaluator (v5, read for its
// definitions), a BM25 ranker with the formula of Lucene 8+ and Pyserini's
// defaults, exact dense top-k over unit vectors, and the fusion of rankings:
// by reciprocal ranks (Fuse), weighted per ranking (WeightedFuse), or by a
// convex combination of min-max normalised scores (ConvexFuse), with the
// weight chosen on held-out queries (TuneFusion, for either as a Fuser).
//
// A query's ranking is a list of Hits, best first. With rel(i) = 1 when the
// i-th hit (1-based) is relevant and 0 otherwise, R the query's relevant
// documents and |R| their number (the qrels with a score above 0):
//
//	MRR@k       = 1 / (the rank of the first relevant hit among the top k), 0 if none
//	Accuracy@k  = 1 if a relevant hit is among the top k, else 0
//	Precision@k = Σ_{i≤k} rel(i) / k        (k even when fewer hits came back)
//	Recall@k    = Σ_{i≤k} rel(i) / |R|
//	nDCG@k      = Σ_{i≤k} rel(i)/log2(i+1) / Σ_{i≤min(k,|R|)} 1/log2(i+1)
//	AP@k        = Σ_{i≤k} rel(i)·P@i / min(k, |R|)
//
// each averaged over the queries that have at least one relevant document
// (others are left out, as the evaluator leaves them out). Relevance is
// binary: a graded qrel counts as relevant whatever its positive score.
// The evaluator sorts each query's hits by score with Python's stable sort,
// so hits of equal score keep the order they came in; Evaluate does the
// same. Which of several equal-scored documents the evaluator keeps at the
// k-th place is decided by its heap of (score, corpus id) tuples, so by
// corpus id; the rankers here break ties by corpus position instead
// (the earlier document first), as Lucene breaks them by document number.
//
// The input files are BEIR's (Thakur et al. 2021): JSONL documents
// {"_id", "text"} with an optional "title", and a qrels TSV "query-id
// corpus-id score" with a header line. ReadDocs and ReadQrels read them a
// line at a time, each line at most a limit (DefaultMaxLineBytes, 1 MiB,
// unless the caller gives another) and valid UTF-8, refused with the file
// and the line as soon as the limit is passed; Qrels.Check refuses qrels
// that pair no query with a document of the corpus.
package retrieval
