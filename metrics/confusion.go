package metrics

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Confusion is a confusion matrix: Counts[g][p] is the number of examples of
// gold class g predicted as class p (sklearn's confusion_matrix layout: rows
// are the truth, columns the prediction).
type Confusion struct {
	Labels []string `json:"labels"`
	Counts [][]int  `json:"counts"`
}

// NewConfusion counts pred against gold for the classes named by labels
// (class ids index labels). Ids outside [0, len(labels)) panic.
func NewConfusion(pred, gold []int, labels []string) *Confusion {
	sameLen(len(pred), len(gold))
	k := len(labels)
	c := &Confusion{Labels: append([]string(nil), labels...), Counts: make([][]int, k)}
	for i := range c.Counts {
		c.Counts[i] = make([]int, k)
	}
	for i := range gold {
		c.Counts[gold[i]][pred[i]]++
	}
	return c
}

// Total returns the number of examples counted.
func (c *Confusion) Total() int {
	n := 0
	for _, row := range c.Counts {
		for _, v := range row {
			n += v
		}
	}
	return n
}

// Class returns the precision, recall and F1 of class k and its support
// (the number of gold examples of class k), with 0 for undefined ratios.
func (c *Confusion) Class(k int) (precision, recall, f1 float64, support int) {
	tp := c.Counts[k][k]
	var fp, fn int
	for j := range c.Counts {
		if j != k {
			fp += c.Counts[j][k]
			fn += c.Counts[k][j]
		}
	}
	p, r, f := prf(tp, fp, fn)
	return p, r, f, tp + fn
}

// String renders the matrix as a text table, rows gold and columns
// predicted, followed by per-class precision, recall, F1 and support.
func (c *Confusion) String() string {
	var b strings.Builder
	w := len("gold \\ pred")
	for _, l := range c.Labels {
		w = max(w, utf8.RuneCountInString(l))
	}
	cw := 6
	for _, l := range c.Labels {
		cw = max(cw, utf8.RuneCountInString(l)+1)
	}
	pad := func(s string, n int) string { return s + strings.Repeat(" ", max(0, n-utf8.RuneCountInString(s))) }
	lpad := func(s string, n int) string { return strings.Repeat(" ", max(0, n-utf8.RuneCountInString(s))) + s }
	b.WriteString(pad("gold \\ pred", w))
	for _, l := range c.Labels {
		b.WriteString(" " + lpad(l, cw))
	}
	b.WriteString(" | " + lpad("prec", 6) + " " + lpad("recall", 6) + " " + lpad("f1", 6) + " " + lpad("n", 6) + "\n")
	for i, l := range c.Labels {
		b.WriteString(pad(l, w))
		for _, v := range c.Counts[i] {
			b.WriteString(" " + lpad(fmt.Sprint(v), cw))
		}
		p, r, f, n := c.Class(i)
		fmt.Fprintf(&b, " | %6.3f %6.3f %6.3f %6d\n", p, r, f, n)
	}
	return b.String()
}
