package pipeline

import (
	"fmt"
	"testing"
)

// naiveQAParts is the windows' context spans as HF's overflow makes them:
// from 0, every room − stride tokens, until one reaches the end.
func naiveQAParts(n, room, stride int) [][2]int {
	if n <= room {
		return [][2]int{{0, n}}
	}
	var parts [][2]int
	for lo := 0; ; lo += room - stride {
		hi := min(lo+room, n)
		parts = append(parts, [2]int{lo, hi})
		if hi == n {
			return parts
		}
	}
}

// QAWindowCount counts the windows QAWindows makes, and refuses what it
// refuses with the same error, and the windows span the context as the
// naive loop does, over strides around a window's room, window lengths
// that leave the question no room, cut questions and contexts that fit.
// QADefaultMaxSeqLen is the length QAWindows uses for 0.
func TestQAWindowCount(t *testing.T) {
	_, tok := qaModel(t, 1)
	if r, err := (QuestionAnsweringOptions{}).resolve(tok); err != nil || QADefaultMaxSeqLen(tok) != r.MaxSeqLen {
		t.Errorf("QADefaultMaxSeqLen %d, QuestionAnswering's default %d (%v)", QADefaultMaxSeqLen(tok), r.MaxSeqLen, err)
	}
	many, refused := 0, 0
	for _, text := range []string{"the ships", qaLong, qaLong + " " + qaLong + " " + qaLong} {
		for _, question := range []string{qaQuestion, qaQuestion + " " + qaQuestion} {
			for _, seq := range []int{0, 3, 4, 8, 9, 10, 12, 14, 20, 40} {
				for _, stride := range []int{-1, 0, 1, 2, 3, 5, 7, 11, 40} {
					for _, qmax := range []int{0, 2, 5} {
						o := QuestionAnsweringOptions{MaxSeqLen: seq, DocStride: stride, MaxQuestionLen: qmax}
						name := fmt.Sprintf("%d context bytes, %d question bytes, %+v", len(text), len(question), o)
						c, ws, werr := QAWindows(tok, question, text, o)
						n, err := QAWindowCount(tok, question, text, o)
						if fmt.Sprint(err) != fmt.Sprint(werr) || n != len(ws) {
							t.Errorf("%s: %d windows (%v), QAWindows makes %d (%v)", name, n, err, len(ws), werr)
						}
						if werr != nil {
							refused++
							continue
						}
						r, _ := o.resolve(tok)
						room := ws[0].Hi - ws[0].Lo
						if len(ws) > 1 {
							many++
							room = r.MaxSeqLen - (ws[0].ContextStart - 2) - 3
						}
						want := naiveQAParts(len(c.IDs), room, r.DocStride)
						got := make([][2]int, len(ws))
						for i, w := range ws {
							got[i] = [2]int{w.Lo, w.Hi}
						}
						if fmt.Sprint(got) != fmt.Sprint(want) {
							t.Errorf("%s: windows %v, the naive loop's %v", name, got, want)
						}
					}
				}
			}
		}
	}
	if many == 0 || refused == 0 {
		t.Errorf("%d cases of more than one window, %d refused: the grid misses one kind", many, refused)
	}
	t.Logf("%d cases of more than one window, %d refused", many, refused)
}
