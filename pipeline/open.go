package pipeline

import (
	"errors"
	"path/filepath"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/sentence"
	"github.com/roformer-go/roformer/tokenizer"
)

// OpenOptions say how Open reads a model folder.
type OpenOptions struct {
	// Head is the head to build; "" is the one config.json's architectures
	// name (roformer.HeadForConfig), or HeadFor's choice.
	Head roformer.Head
	// HeadFor, when not nil, chooses the head "" from the configuration
	// (roformer.LoadOptions.HeadFor).
	HeadFor func(*roformer.Config) roformer.Head
	// Precision of the linear layers' products; see
	// roformer.Model.SetPrecision. "" is the folder's own: int8 for an
	// int8 folder (roformer.Model.SaveQuantized) where the machine runs
	// int8, else fp32 prepared for inference (roformer.LoadOptions.Inference).
	Precision roformer.Precision
	// NoTokenizer leaves the tokenizer unread (for callers that take token
	// ids, such as `roformer forward` and `roformer bench`).
	NoTokenizer bool
}

// Model is a model folder opened for inference: the model with what the
// loader saw (roformer.Loaded: the folder, the weight file, its format and
// dtypes, the bind report) and the folder's tokenizer.
type Model struct {
	*roformer.Loaded
	// Tokenizer is the folder's tokenizer; nil with OpenOptions.NoTokenizer.
	Tokenizer *tokenizer.Tokenizer
	// Sentence is the folder's sentence-transformers configuration
	// (modules.json and the files it names; see sentence.Load), nil for a
	// plain model folder. Embed and the server make their vectors as it
	// says.
	Sentence *sentence.Folder
}

// Open reads the model folder dir for inference, as the inference commands
// and the server open a model (some training runs and experiments call
// roformer.Load, which Open wraps, for the weights alone): config.json
// once, the weights (compared with the config before a model of its size
// is allocated, and bound with every missing, unexpected and mis-shaped
// tensor reported; see roformer.Load), the head,
// the precision of the products, the tokenizer (tokenizer.Load: the
// files at the top of dir or in dir/tokenizer), and, when dir holds
// modules.json, its sentence-transformers modules (sentence.Load; the
// transformer is then read from the folder modules.json names for it; a
// max_seq_length it leaves out is inferred from the config and the
// tokenizer, as sentence-transformers does: Folder.InferMaxSeqLength).
//
// A folder's max_seq_length is clamped to the config's
// max_position_embeddings, the length the model was trained for.
// sentence-transformers takes max_seq_length as it is and truncates texts
// to it, so a longer one reaches the model, where Hugging Face fails on
// positions past the table (absolute position embeddings, and RoFormer's
// sinusoidal table too, have max_position_embeddings rows). This toolkit's
// rotary positions have no table, so nothing else would stop a
// sentence_bert_config.json of 1,048,576 from letting one text run the
// quadratic attention over a million tokens; the plain folder's limit is
// max_position_embeddings, and so is the sentence-transformers folder's.
//
// The errors are roformer.Load's (a folder without the head's weights wraps
// roformer.ErrHeadMissing) and tokenizer.Load's, as a *TokenizerError.
func Open(dir string, opts OpenOptions) (*Model, error) {
	st, err := sentence.Load(dir)
	switch {
	case errors.Is(err, sentence.ErrNotFolder):
		st = nil
	case err != nil:
		return nil, err
	case st.TransformerPath != "":
		dir = filepath.Join(dir, st.TransformerPath)
	}
	l, err := roformer.Load(dir, opts.Head, roformer.LoadOptions{Precision: opts.Precision, HeadFor: opts.HeadFor, Inference: true})
	if err != nil {
		return nil, err
	}
	if st != nil {
		if err := st.Check(l.Model.Config.HiddenSize); err != nil {
			return nil, err
		}
	}
	m := &Model{Loaded: l, Sentence: st}
	if !opts.NoTokenizer {
		if m.Tokenizer, err = tokenizer.Load(dir); err != nil {
			return nil, &TokenizerError{Err: err}
		}
		if st != nil {
			// max_seq_length null or not given: sentence-transformers'
			// min(max_position_embeddings, model_max_length).
			st.InferMaxSeqLength(l.Model.Config.MaxPositionEmbeddings, m.Tokenizer.Config().ModelMaxLength)
		}
	}
	if p := l.Model.Config.MaxPositionEmbeddings; st != nil && p > 0 && st.MaxSeqLength > p {
		st.MaxSeqLength = p
	}
	return m, nil
}

// TokenizerError is Open's error when the model loaded but the folder's
// tokenizer did not: tokenizer.Load's error, with the same text.
type TokenizerError struct{ Err error }

func (e *TokenizerError) Error() string { return e.Err.Error() }

// Unwrap returns tokenizer.Load's error.
func (e *TokenizerError) Unwrap() error { return e.Err }
