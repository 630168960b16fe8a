package tokenizer

import "strings"

// DecodeOptions are the arguments of HF's tokenizer.decode.
type DecodeOptions struct {
	// SkipSpecialTokens drops the ids of special tokens.
	SkipSpecialTokens bool
	// KeepTokenizationSpaces keeps the spaces that decode puts before
	// punctuation and contractions; by default they are removed, as HF's
	// clean_up_tokenization_spaces=True does.
	KeepTokenizationSpaces bool
}

// Decode turns ids back into text as HF's tokenizer.decode(ids,
// skip_special_tokens=skipSpecial) does: tokens joined by spaces, "##"
// continuations glued to the token before them, and the spaces before
// . ? ! , and English contractions removed. Ids out of range decode as the
// unknown token. Lower-casing and accent stripping are not undone, and
// RoFormer's Chinese words come back separated by spaces.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	return t.DecodeWith(ids, DecodeOptions{SkipSpecialTokens: skipSpecial})
}

// DecodeWith is Decode with all of HF's decode options.
func (t *Tokenizer) DecodeWith(ids []int, opts DecodeOptions) string {
	var b strings.Builder
	first := true
	for _, id := range ids {
		if opts.SkipSpecialTokens && t.specialIDs[id] {
			continue
		}
		tok, ok := t.vocab.Token(id)
		if !ok {
			tok = t.cfg.UnkToken
		}
		// convert_tokens_to_string: " ".join(tokens).replace(" ##", "")
		if rest, cont := strings.CutPrefix(tok, continuationPrefix); cont && !first {
			b.WriteString(rest)
		} else {
			if !first {
				b.WriteByte(' ')
			}
			b.WriteString(tok)
		}
		first = false
	}
	out := strings.TrimFunc(b.String(), isPySpace)
	if !opts.KeepTokenizationSpaces {
		out = cleanUpTokenization(out)
	}
	return out
}

// cleanUpTokenizationReplacer is PreTrainedTokenizerBase.clean_up_tokenization.
var cleanUpTokenizationReplacer = []struct{ old, new string }{
	{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
	{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
}

func cleanUpTokenization(s string) string {
	// Applied one after the other, like the chained str.replace calls.
	for _, r := range cleanUpTokenizationReplacer {
		s = strings.ReplaceAll(s, r.old, r.new)
	}
	return s
}
