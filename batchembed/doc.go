// Package batchembed embeds a file: one vector per line of a JSONL file, written
// to a JSONL file in the input's order, in batches, resumably, and sharded
// over the ranks of a process group (an MPI job) when it is given one.
// `roformer embed` is a thin shell over Run.
//
// Input. Each line is a JSON object {"text": …} with optionally
// "text_pair" (encoded with the text as [CLS] a [SEP] b [SEP]) and "id" (a
// string or a number, copied to the output), or a bare JSON string (the
// text). Other keys are ignored. A line that is none of these, or empty,
// is an error that names the file and the line number (from 1).
//
// Bounds. The input is read through the toolkit's one line reader
// (internal/lines): a line is at most Options.MaxLineBytes (1 MiB by
// default), refused as soon as the limit is passed without reading the
// rest of it, and a line that is not valid UTF-8 is refused; both errors
// name the file and the line. An output that is the input (the same file,
// through a symlink or a hard link too) is refused before anything is
// read or written.
//
// Output. Line i of the output (from 0) is
//
//	{"index": i, "id": …, "embedding": [v_0, …, v_{H-1}]}
//
// with "id" only when the input line had one, and each v_j the shortest
// decimal that reads back as the same float32.
//
// Vectors. The encoder runs without the model's head; each input's vector is
// pooled as TEI's POST /embed pools (pipeline.Embed): the model's pooler when
// it has one (RoFormer-Sim), else the mean over the input's tokens, or as
// Options.Pooling says; normalized to unit length when asked.
//
// Batches. The input is cut into parts of Options.Window lines. The lines of
// a part are sorted by length and run in batches of neighbours that fit a
// row and a padded-token budget, so little work goes to padding; a part's
// vectors depend only on its lines and the options, never on which process
// ran it or on what ran before.
//
// Resume. Work happens in a folder beside the output (OUT.parts/ unless
// Options.WorkDir says otherwise): manifest.json (what the run is: the
// input's size and SHA-256, the model's SHA-256, the options), one
// part-NNNNNN.jsonl per finished part and one progress-R.json per rank (a
// record for people watching a run: parts, lines and tokens done, seconds).
// Every file is written to a temporary name, synced and renamed
// (internal/atomicfile), so a part is either complete or absent. A run
// that stops (Ctrl-C, a kill, a crash) loses at most the parts it was
// running; the same command again skips the finished parts and ends with
// the same bytes as a run that never stopped. A folder made for another
// input, model or options is an error that names what differs. The output
// itself is written once, atomically, from the parts in order, when every
// part is done; then the folder is removed.
//
// Ranks. With a Group of Size N (an MPI job, see package distributed), part p is
// rank p mod N's. Each rank reads the whole input (to check it and find
// the parts), embeds its parts and writes them into the work folder, which
// must therefore be one folder for every rank (one host, or a shared file
// system); then the ranks report to rank 0 (Group.Gather), rank 0 writes
// the output and tells the others how the run ended (Group.Bcast), so every
// rank returns at once, and with an error when any rank failed. The parts are those a single process writes, so N ranks give
// the output of one process byte for byte (with the same threads per
// process and matrix-product backend), and a run stopped with N ranks may
// be continued with any other number.
package batchembed
