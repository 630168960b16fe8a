package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roformer-go/roformer/tokenizer/jieba"
)

// Benchmark texts: Newton's Opticks (public domain, in every Go
// installation) and Debian fortunes-zh's "chinese" file (GPL-3+, read from
// the system when installed, never shipped; apt-get install fortunes-zh).
// Each benchmark trains its vocabulary on the first half of the lines and
// tokenizes all of them, so that the second half meets unseen words.

const fortunesZh = "/usr/share/games/fortunes/chinese"

func benchLines(b *testing.B, lang string) []string {
	b.Helper()
	path := filepath.Join(runtime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt")
	if lang == "zh" {
		path = fortunesZh
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Skipf("benchmark text absent (%v); for Chinese: apt-get install fortunes-zh", err)
	}
	var lines []string
	for l := range strings.Lines(string(raw)) {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

var benchTokenizers = map[string]*Tokenizer{}

func benchTokenizer(b *testing.B, lang string, kind Kind, lines []string) *Tokenizer {
	b.Helper()
	key := lang + kind.String()
	if t := benchTokenizers[key]; t != nil {
		return t
	}
	half := slices.Values(lines[:len(lines)/2])
	var v *Vocab
	var err error
	if lang == "zh" {
		v, err = TrainChineseWords(half, ChineseVocabOptions{VocabSize: 20000})
	} else {
		opts := DefaultTrainOptions()
		opts.VocabSize = 8000
		v, err = TrainWordPiece(half, opts)
	}
	if err != nil {
		b.Fatal(err)
	}
	t, err := New(v, DefaultConfig(kind))
	if err != nil {
		b.Fatal(err)
	}
	benchTokenizers[key] = t
	return t
}

// benchBatch is the number of lines per EncodeBatch call.
const benchBatch = 256

// BenchmarkEncode reports tokens/s for Encode (ids, types, mask, tokens,
// offsets) one line at a time on one goroutine (serial) and for EncodeBatch
// on batches of 256 lines with one worker per CPU (batch).
func BenchmarkEncode(b *testing.B) {
	for _, c := range []struct {
		lang string
		kind Kind
	}{{"en", Bert}, {"en", RoFormer}, {"zh", RoFormer}, {"zh", Bert}} {
		name := c.lang + "_" + strings.TrimSuffix(c.kind.String(), "Tokenizer")
		b.Run(name+"/serial", func(b *testing.B) {
			lines := benchLines(b, c.lang)
			tok := benchTokenizer(b, c.lang, c.kind, lines)
			tokens, bytes := 0, 0
			for _, l := range lines {
				tokens += len(tok.EncodeIDs(l))
				bytes += len(l)
			}
			b.SetBytes(int64(bytes))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				for _, l := range lines {
					if _, err := tok.Encode(l, EncodeOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportTokens(b, tokens, cpu0)
		})
		b.Run(name+"/batch", func(b *testing.B) {
			lines := benchLines(b, c.lang)
			tok := benchTokenizer(b, c.lang, c.kind, lines)
			inputs := make([]Input, len(lines))
			tokens, bytes := 0, 0
			for i, l := range lines {
				inputs[i] = Input{Text: l}
				tokens += len(tok.EncodeIDs(l))
				bytes += len(l)
			}
			b.SetBytes(int64(bytes))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				for lo := 0; lo < len(inputs); lo += benchBatch {
					if _, err := tok.EncodeBatch(inputs[lo:min(lo+benchBatch, len(inputs))], EncodeOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportTokens(b, tokens, cpu0)
		})
	}
}

// BenchmarkEncodeIDs measures the lean path that pretraining uses
// (EncodeIDs: ids only, the data.Encoder interface).
func BenchmarkEncodeIDs(b *testing.B) {
	for _, lang := range []string{"en", "zh"} {
		b.Run(lang, func(b *testing.B) {
			lines := benchLines(b, lang)
			tok := benchTokenizer(b, lang, RoFormer, lines)
			tokens, bytes := 0, 0
			for _, l := range lines {
				tokens += len(tok.EncodeIDs(l))
				bytes += len(l)
			}
			b.SetBytes(int64(bytes))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				for _, l := range lines {
					tok.EncodeIDs(l)
				}
			}
			reportTokens(b, tokens, cpu0)
		})
	}
}

// TestJiebaLoadTime logs how long the embedded dictionary takes to build
// (it is built once per process; this measures a fresh build).
func TestJiebaLoadTime(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	start := time.Now()
	r, err := jieba.DefaultDictText()
	if err != nil {
		t.Fatal(err)
	}
	d, err := jieba.ReadDictionary(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("jieba dictionary: %d words, %d trie nodes, built in %v", d.Words(), d.Nodes(), time.Since(start))
}

// reportTokens reports tokens per wall-clock second and per CPU second of
// the whole process (all goroutines and the GC): the second stays
// meaningful when other programs share the machine.
func reportTokens(b *testing.B, tokens int, cpu0 time.Duration) {
	n := float64(tokens) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "tokens/s")
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(n/cpu.Seconds(), "tokens/cpu-s")
	}
}
