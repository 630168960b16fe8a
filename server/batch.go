package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

// Dynamic batching. Every request of a POST route holds one of
// Options.MaxConcurrentRequests slots from the moment its body has been
// read until it is answered (guard.go); a request that finds none free is
// refused at once (429 with Retry-After), so the queue, and the memory it
// holds, stay bounded. Once tokenized, a request's rows (one per input) go
// into the queue of the scheduler, one goroutine that forms the batches and
// runs their forward passes, one at a time (they share the gate with
// fill-mask's). For each batch it takes the oldest waiting row, then the
// waiting rows nearest to it in length, as many as fit
// Options.MaxBatchRequests rows and Options.MaxBatchTokens padded tokens
// (rows × the longest row); a row longer than the budget runs alone. When
// other requests are still being read or tokenized and the batch is not full,
// it waits up to Options.MaxBatchWait for them; with nothing on its way it
// does not wait, so a lone client pays no delay. Rows of a request whose
// client has gone are dropped before their forward pass. Each request is
// answered once all its rows have run.

// pooling says how a row's vector is read from the forward pass.
type pooling int

const (
	poolVector pooling = iota // the row's pipeline.Vectorizer: a pooling, then a sentence-transformers folder's modules
	poolLogits                // the sequence-classification head's logits (tei.go)
	poolTokens                // every kept position's last hidden state, one after the other (tei_tokens.go)
	poolSparse                // pipeline.SparsePool: the masked-LM head's logits, in chunks (tei_tokens.go)
)

// embedRow is one input of an embedding request: its tokens and, once its
// forward pass has run, its pooled vector. A poolVector row has its
// vectorizer and the leading positions it leaves out (pipeline.EmbedRow.Skip).
type embedRow struct {
	ids, types []int32
	pool       pooling
	vz         *pipeline.Vectorizer
	skip       int
	vec        []float32
}

// embedJob is one request's rows. Only the scheduler touches left, err and
// finished after the job is queued; done is closed when it is finished.
type embedJob struct {
	ctx      context.Context
	rows     []embedRow
	left     int
	err      error
	finished bool
	done     chan struct{}
	// slot gives the request's slot back once: when the scheduler finishes
	// the job, or as soon as its client leaves (a crowd of clients that
	// leave must not hold the slots until the next batch is formed).
	slot sync.Once
	// Times for the timing headers (metrics.go): from queueing to the
	// first batch its rows ran in, and the forward passes they ran in.
	queuedAt             time.Time
	started              bool
	queueTime, inferTime time.Duration
}

// pendingRow is row i of job j, waiting for a batch.
type pendingRow struct {
	j *embedJob
	i int
}

func (p pendingRow) len() int { return len(p.j.rows[p.i].ids) }

var (
	errOverloaded = errors.New("the server is busy: too many requests queued")
	errClosed     = errors.New("the server is shutting down")
)

// admit takes a slot for a request whose body is in, or returns false
// when every slot is taken (or the server is closed). A batched request
// (whose rows will go through submit) is counted in preparing until it is
// queued. handle (guard.go) gives the slot back (release) unless the
// request hands it to submit.
func (s *Server) admit(batched bool) bool {
	if s.closed.Load() {
		return false
	}
	select {
	case s.slots <- struct{}{}:
		if batched {
			s.preparing.Add(1)
		}
		return true
	default:
		return false
	}
}

// submit queues the rows of an admitted request and waits for them. It
// returns ctx's error when the client leaves first (the scheduler then drops
// the rows that have not run), and the forward pass's error when it fails.
// The slot goes back when the scheduler is done with the job.
func (s *Server) submit(ctx context.Context, rows []embedRow) error {
	st := stateOf(ctx)
	if st == nil || !st.slot || st.handed || !st.batched {
		panic("server: submit without the admission slot of a batched route") // a bug: a route registered without batched
	}
	st.handed = true // the scheduler gives the slot back
	s.yieldCPU(st)
	t, tokens := timingOf(ctx), 0
	for _, r := range rows {
		tokens += len(r.ids)
	}
	t.queued(tokens)
	j := &embedJob{ctx: ctx, rows: rows, left: len(rows), done: make(chan struct{}), queuedAt: time.Now()}
	s.startScheduler.Do(func() { go s.schedule() })
	// te_queue_size counts the rows from here until a batch takes them (or
	// they are dropped).
	s.metrics.queueSize.Add(float64(len(rows)))
	s.queue <- j // blocks only while 2×MaxConcurrentRequests jobs, live or left, wait to be drained
	s.preparing.Add(-1)
	select {
	case <-j.done:
		if j.err == nil {
			t.ran(j)
		}
		return j.err
	case <-ctx.Done():
		j.slot.Do(func() { <-s.slots }) // the scheduler drops the rows later
		return ctx.Err()
	case <-s.quit:
		return errClosed
	}
}

// finish ends job j with err (nil: every row has its vector) and gives its
// slot back.
func (s *Server) finish(j *embedJob, err error) {
	if j.finished {
		return
	}
	j.finished, j.err = true, err
	j.slot.Do(func() { <-s.slots }) // before done: an answered request holds no slot
	close(j.done)
}

// schedule is the scheduler's loop; it ends when the server is closed.
func (s *Server) schedule() {
	var pending []pendingRow
	add := func(j *embedJob) {
		for i := range j.rows {
			pending = append(pending, pendingRow{j, i})
		}
	}
	drain := func() {
		for {
			select {
			case j := <-s.queue:
				add(j)
			default:
				return
			}
		}
	}
	for {
		if len(pending) == 0 {
			select {
			case j := <-s.queue:
				add(j)
			case <-s.quit:
				s.failPending(pending)
				return
			}
		}
		if s.beforeBatch != nil {
			s.beforeBatch()
		}
		drain()
		if wait := s.opts.MaxBatchWait; wait > 0 && s.preparing.Load() > 0 && !s.full(pending) {
			t := time.NewTimer(wait)
		company:
			for s.preparing.Load() > 0 && !s.full(pending) {
				select {
				case j := <-s.queue:
					add(j)
				case <-t.C:
					break company
				}
			}
			t.Stop()
		}
		select {
		case s.gate <- struct{}{}: // no fill-mask forward is running
		case <-s.quit:
			drain()
			s.failPending(pending)
			return
		}
		drain() // what came while another forward ran
		pending = s.dropGone(pending)
		if len(pending) == 0 {
			<-s.gate
			continue
		}
		var batch []pendingRow
		batch, pending = s.pick(pending)
		s.metrics.queueSize.Sub(float64(len(batch)))
		s.runBatch(batch) // releases the gate
	}
}

// failPending ends every job still waiting, and every queued one, with
// errClosed.
func (s *Server) failPending(pending []pendingRow) {
	for _, p := range pending {
		s.finish(p.j, errClosed)
	}
	s.metrics.queueSize.Sub(float64(len(pending)))
	for {
		select {
		case j := <-s.queue:
			s.finish(j, errClosed)
			s.metrics.queueSize.Sub(float64(len(j.rows)))
		default:
			return
		}
	}
}

// full says whether the pending rows already make a full batch.
func (s *Server) full(pending []pendingRow) bool {
	longest := 0
	for _, p := range pending {
		longest = max(longest, p.len())
	}
	return len(pending) >= s.opts.MaxBatchRequests || len(pending)*longest >= s.opts.MaxBatchTokens
}

// dropGone ends the jobs whose client has left (and those already ended by
// a failed forward pass) and returns the rows still to run, in order.
func (s *Server) dropGone(pending []pendingRow) []pendingRow {
	n := len(pending)
	pending = slices.DeleteFunc(pending, func(p pendingRow) bool {
		if !p.j.finished && p.j.ctx.Err() != nil {
			s.finish(p.j, p.j.ctx.Err())
		}
		return p.j.finished
	})
	s.metrics.queueSize.Sub(float64(n - len(pending)))
	return pending
}

// pick chooses the next batch from the pending rows (oldest first): the
// oldest row, then its neighbours in length order (shorter ones first:
// they add no padding) while the batch keeps within MaxBatchRequests rows
// and MaxBatchTokens padded tokens. It returns the batch, sorted by length,
// and the rows left, still oldest first.
func (s *Server) pick(pending []pendingRow) (batch, rest []pendingRow) {
	budget := s.opts.MaxBatchTokens
	order := make([]int, len(pending))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(pending[a].len(), pending[b].len()) })
	anchor := slices.Index(order, 0)
	lo, hi, longest := anchor, anchor, pending[0].len()
	for n := 1; n < s.opts.MaxBatchRequests; n++ {
		if lo > 0 && (n+1)*longest <= budget {
			lo--
		} else if hi+1 < len(order) && (n+1)*pending[order[hi+1]].len() <= budget {
			hi++
			longest = pending[order[hi]].len()
		} else {
			break
		}
	}
	taken := make([]bool, len(pending))
	for _, k := range order[lo : hi+1] {
		batch = append(batch, pending[k])
		taken[k] = true
	}
	for k, p := range pending {
		if !taken[k] {
			rest = append(rest, p)
		}
	}
	return batch, rest
}

// runBatch runs one forward pass over the rows of batch (sorted by length),
// pools each row and finishes the jobs whose rows have all run. It releases
// the gate, also when the forward pass panics (the batch's jobs then get a
// 500's error).
//
// The pass runs on the server's Session: its output's tensors are the
// session's buffers, which the next batch overwrites. Only the scheduler
// goroutine calls runBatch, so no other batch runs before this one returns,
// and every vector a job keeps is copied out before then (poolRow's and
// poolSparse's are slices of their own).
func (s *Server) runBatch(batch []pendingRow) {
	B, T := len(batch), batch[len(batch)-1].len()
	for _, p := range batch {
		T = max(T, p.len())
	}
	b := roformer.PadBatch(B, T, int32(s.tok.PadID()), func(i int) ([]int32, []int32) {
		r := &batch[i].j.rows[batch[i].i]
		return r.ids, r.types
	})
	tokens := 0
	for _, p := range batch {
		tokens += p.len()
	}
	s.metrics.batchSize.Observe(float64(B))
	s.metrics.batchTokens.Observe(float64(tokens))
	start := time.Now()
	out, err := func() (out *roformer.Output, err error) {
		defer func() {
			<-s.gate
			if v := recover(); v != nil {
				err = fmt.Errorf("panic in the forward pass: %v", v)
			}
		}()
		if out, err = s.sess.Forward(context.Background(), b, nil, roformer.Options{SkipHead: !wantsLogits(batch)}); err == nil {
			err = s.poolSparse(out, b, batch) // the masked-LM head in chunks, while the batch holds the gate
		}
		return out, err
	}()
	took := time.Since(start)
	for i, p := range batch {
		if !p.j.started {
			p.j.started, p.j.queueTime = true, start.Sub(p.j.queuedAt)
		}
		if i == 0 || !slices.ContainsFunc(batch[:i], func(q pendingRow) bool { return q.j == p.j }) {
			p.j.inferTime += took // once per job and batch
		}
	}
	if s.afterForward != nil {
		s.afterForward(B, T)
	}
	if err == nil && out.PoolerOutput == nil {
		for _, p := range batch {
			if r := p.j.rows[p.i]; r.pool == poolVector && r.vz.Pooler {
				err = errors.New("the model has no pooler")
			}
		}
	}
	if err != nil {
		s.opts.Log.Printf("server: a batch of %d rows × %d tokens: %v", B, T, err)
		for _, p := range batch {
			s.finish(p.j, err)
		}
		return
	}
	H := s.model.Config.HiddenSize
	for i, p := range batch {
		r := &p.j.rows[p.i]
		var err error
		if r.vec, err = poolRow(out, b.AttentionMask[i*T:(i+1)*T], i, T, H, r); err != nil {
			// A bug, not the request's doing: its answer is a 500, and the
			// scheduler (whose panic would end the process) goes on.
			s.opts.Log.Printf("server: row %d of a batch of %d×%d: %v", i, B, T, err)
			s.finish(p.j, err)
		}
		if p.j.left--; p.j.left == 0 {
			s.finish(p.j, nil)
		}
	}
}

// poolSparse sets the vectors of the batch's poolSparse rows
// (pipeline.SparsePool): the masked-LM head (the only head /embed_sparse is
// served with) runs on MaxSparseBatchLogits / vocabulary positions at a
// time, so the batch holds that many logits, not its tokens × vocabulary.
func (s *Server) poolSparse(out *roformer.Output, b *roformer.Batch, batch []pendingRow) error {
	var rows []int
	for i, p := range batch {
		if p.j.rows[p.i].pool == poolSparse {
			rows = append(rows, i)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	vecs, err := pipeline.SparsePool(s.model, out, b.AttentionMask, rows, s.opts.MaxSparseBatchLogits/max(1, s.model.Config.VocabSize))
	if err != nil {
		return err
	}
	for k, i := range rows {
		batch[i].j.rows[batch[i].i].vec = vecs[k]
	}
	return nil
}

// poolRow reads row i's vector from a forward pass over T positions: the
// head's logits for poolLogits, the hidden states for poolTokens, the
// sparse vector poolSparse has set for poolSparse, else the row's vectorizer's vector (sums in
// float64 over the positions in order, so padding changes nothing).
// runBatch has checked that a row pooled by the pooler has one. The vector
// shares no memory with out, whose buffers the next batch reuses.
func poolRow(out *roformer.Output, mask []int32, i, T, H int, r *embedRow) ([]float32, error) {
	switch r.pool {
	case poolLogits:
		NL := out.Logits.Shape[1]
		return append([]float32(nil), out.Logits.Data[i*NL:(i+1)*NL]...), nil
	case poolTokens:
		return tokenVectors(out.LastHiddenState.Data, mask, i, T, H), nil
	case poolSparse:
		return r.vec, nil // runBatch's poolSparse
	}
	return r.vz.Vector(out, mask, i, r.skip) // runBatch has checked the pooler; every row has a token
}

// embedStatus maps an error of submit to an HTTP status.
func embedStatus(ctx context.Context, err error) int {
	switch {
	case errors.Is(err, errOverloaded):
		return http.StatusTooManyRequests
	case errors.Is(err, errClosed), ctx.Err() != nil:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Close stops the scheduler; requests still waiting for a batch get 503,
// and later embedding requests too. Call it after http.Server.Shutdown has
// let the requests in flight finish.
func (s *Server) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		close(s.quit)
	}
	return nil
}
