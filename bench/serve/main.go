// Command serve is the load and fault test of `roformer serve` (issue #15).
//
//	go run ./bench/serve [-dur 10s] [-soak 10m] [-levels 1,8,32,64,128]
//
// It builds the roformer binary (or takes -bin), makes a masked-LM model
// folder with `roformer pretrain --steps 30` and a sequence-classification
// one by fine-tuning it for one epoch on a tiny generated file (or takes
// -model and -cls), starts `roformer serve` on 127.0.0.1 and then:
//
//   - load: -levels concurrent clients on /embed (masked-LM folder) and on
//     /predict (classification folder), -dur each, one 15-token text per
//     request: throughput, p50, p99, non-2xx answers and transport errors;
//   - the bare forward of the same text (`roformer bench --head base`);
//   - a soak of -soak at -soak-clients clients on /embed and
//     /v1/embeddings in turn, texts of 1 to 600 words (the longer
//     truncated), with the server's RSS (/proc/PID/status) before,
//     during and after;
//   - clients that send a request and leave before the answer;
//   - clients that send half a body and wait: the server's body timeout
//     (10 s) must answer them 408, while other clients are still served;
//   - with -phases profile: where a request's time goes at 1 and 64
//     clients (client latency; the server's time by TEI's timing metrics;
//     the mean batch; the CPU of server and load generator) beside the bare
//     forward at batch 1, 32 and 64 on 1 and 2 threads;
//   - goroutines (go_goroutines of /metrics) and open files (/proc/PID/fd)
//     at rest before and after all that;
//   - SIGTERM under load: requests in flight get their answers; while they
//     run (the drain) new requests get 503 (TEI's Unhealthy) on a port
//     still open, with no connection error; the process exits with 0.
//
// Every loop is bounded in time and count; it talks to loopback only. It
// prints a Markdown table and exits non-zero when a fault check fails
// (the performance targets are reported, not enforced).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const text = "the president of the united states said that the economy was good ."

var (
	bin         = flag.String("bin", "", "roformer binary (default: go build ./cmd/roformer into a temporary folder)")
	model       = flag.String("model", "", "masked-LM model folder for /embed (default: roformer pretrain --steps 30)")
	cls         = flag.String("cls", "", "sequence-classification folder for /predict (default: fine-tune -model 1 epoch on a tiny file)")
	threads     = flag.Int("threads", 2, "--threads of the server and of the bare forward")
	dur         = flag.Duration("dur", 10*time.Second, "time per load level")
	levelsFlag  = flag.String("levels", "1,8,32,64,128", "concurrent clients per load level")
	soak        = flag.Duration("soak", 3*time.Minute, "soak duration (issue #15 asks 10m)")
	soakClients = flag.Int("soak-clients", 32, "clients during the soak")
	stallWait   = flag.Duration("stall-wait", 20*time.Second, "longest wait for the server to answer a stalled body (its --body-timeout is 10 s)")
	maxRequests = flag.Int("max-requests", 2_000_000, "cap on the requests of one load run")
	phases      = flag.String("phases", "load,soak,faults,sigterm", "the parts to run, comma-separated (also: profile)")
	profileDur  = flag.Duration("profile-dur", 5*time.Second, "time per client count of the profile phase")
)

var failed bool

func fail(format string, args ...any) {
	failed = true
	fmt.Printf("FAIL: "+format+"\n", args...)
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "serve bench:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

func run() error {
	tmp, err := os.MkdirTemp("", "roformer-loadtest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if *bin == "" {
		*bin = filepath.Join(tmp, "roformer")
		step("building %s", *bin)
		if err := command("go", "build", "-o", *bin, "./cmd/roformer"); err != nil {
			return err
		}
	}
	if *model == "" {
		*model = filepath.Join(tmp, "model")
		step("pretraining %s", *model)
		if err := command(*bin, "pretrain", "--steps", "30", "--out", *model, "--threads", strconv.Itoa(*threads)); err != nil {
			return err
		}
	}
	if *cls == "" {
		*cls = filepath.Join(tmp, "cls")
		train := filepath.Join(tmp, "train.jsonl")
		if err := os.WriteFile(train, trainFile(), 0o644); err != nil {
			return err
		}
		step("fine-tuning %s", *cls)
		if err := command(*bin, "finetune", "--model", *model, "--train", train, "--epochs", "1", "--out", *cls,
			"--threads", strconv.Itoa(*threads), "--quiet"); err != nil {
			return err
		}
	}
	var levels []int
	for _, f := range strings.Split(*levelsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-levels: %q", f)
		}
		levels = append(levels, n)
	}
	cpu := cpuName()
	fmt.Printf("CPU: %s, %d logical CPUs visible; server --threads %d; %s per level\n\n", cpu, numCPU(), *threads, *dur)

	s, err := startServer(*model)
	if err != nil {
		return err
	}
	defer s.kill()
	g0, fd0 := s.atRest()
	if has("load") {
		if err := loadLevels(s, levels); err != nil {
			return err
		}
	}
	if has("profile") {
		if err := profile(s); err != nil {
			return err
		}
	}
	if has("soak") {
		soakRSS(s)
	}
	if has("faults") {
		faults(s)
	}

	g1, fd1 := s.atRest()
	fmt.Printf("\nat rest: goroutines %d before the load, %d after everything; open files %d before, %d after\n", g0, g1, fd0, fd1)
	if g1 > g0+2 || fd1 > fd0+2 {
		fail("goroutines or open files grew: %d→%d, %d→%d", g0, g1, fd0, fd1)
	}

	if has("sigterm") {
		sigterm(s)
	}
	return nil
}

func has(phase string) bool { return slices.Contains(strings.Split(*phases, ","), phase) }

// loadLevels runs the levels on /predict (a server of the classification
// folder, started and stopped here) and on /embed of s, and prints the
// table and the targets.
func loadLevels(s *server, levels []int) error {
	bare, err := bareForward(*model)
	if err != nil {
		return err
	}

	// /predict on the classification folder.
	ps, err := startServer(*cls)
	if err != nil {
		return err
	}
	predict := map[int]result{}
	for _, c := range levels {
		predict[c] = load(ps.url+"/predict", body(), c, *dur, *maxRequests)
	}
	ps.stop()

	// /embed, soak and faults on the masked-LM folder.
	embed := map[int]result{}
	for _, c := range levels {
		embed[c] = load(s.url+"/embed", body(), c, *dur, *maxRequests)
	}
	fmt.Printf("\n| clients | /embed req/s | p50 | p99 | non-2xx / errors | /predict req/s | p50 | p99 | non-2xx / errors |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range levels {
		e, p := embed[c], predict[c]
		fmt.Printf("| %d | %s | %s | %s | %d / %d | %s | %s | %s | %d / %d |\n", c, thousands(e.rps()), ms(e.p(50)), ms(e.p(99)), e.non2xx, e.errs,
			thousands(p.rps()), ms(p.p(50)), ms(p.p(99)), p.non2xx, p.errs)
	}
	one := embed[levels[0]]
	fmt.Printf("\nbare forward (roformer bench --head base --batch 1 --seq %d): %s median\n", bare.seq, ms(bare.d))
	fmt.Println("targets (issue #15):")
	if levels[0] == 1 {
		for _, c := range levels {
			if c == 64 {
				x := embed[64].rps() / one.rps()
				fmt.Printf("  /embed throughput at 64 clients = %.2f× one client (target ≥ 5×): %s\n", x, met(x >= 5))
			}
		}
		x := float64(one.p(50)) / float64(bare.d)
		fmt.Printf("  one-client /embed p50 = %.2f× the bare forward (target ≤ 1.5×): %s\n", x, met(x <= 1.5))
	}
	if r, ok := embed[32]; ok {
		x := float64(r.p(99)) / float64(r.p(50))
		fmt.Printf("  /embed p99 at 32 clients = %.2f× p50 (target ≤ 3×): %s\n", x, met(x <= 3))
	}
	var bad int
	for _, c := range levels {
		bad += embed[c].non2xx + embed[c].errs + predict[c].non2xx + predict[c].errs
	}
	fmt.Printf("  non-2xx answers or errors under load (none wanted): %d: %s\n", bad, met(bad == 0))

	return nil
}

// soakRSS loads s for -soak and checks its RSS stays flat.
func soakRSS(s *server) {
	// Soak. The RSS it is judged on is the first sample, taken after a
	// warm-up of a tenth of the soak (at most a minute), when the heap has
	// grown to the soak's concurrency; the one before the soak is shown too.
	rss0 := s.rss()
	warm := min(*soak/5, 2*time.Minute) // issue #39 judges minute 2 against minute 10
	fmt.Printf("\nsoak: %s at %d clients on /embed and /v1/embeddings, texts of 1 to %d words (past the model's length: truncated); RSS before %s\n", *soak, *soakClients, soakMaxWords, mib(rss0))
	var samples []int64
	stopSample := make(chan struct{})
	var sw sync.WaitGroup
	sw.Add(1)
	go func() {
		defer sw.Done()
		select {
		case <-stopSample:
			return
		case <-time.After(warm):
		}
		samples = append(samples, s.rss())
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopSample:
				return
			case <-t.C:
				samples = append(samples, s.rss())
			}
		}
	}()
	sr := loadEach("/embed and /v1/embeddings, mixed lengths", mixedRequest(s.url), *soakClients, *soak, 1<<40)
	close(stopSample)
	sw.Wait()
	rss1 := s.rss()
	base := rss0
	if len(samples) > 0 {
		base = samples[0]
	}
	lo, hi := rss1, rss1
	for _, v := range samples {
		lo, hi = min(lo, v), max(hi, v)
	}
	drift := float64(rss1-base) / float64(base)
	fmt.Printf("soak: %d requests, %s req/s, p50 %s, p99 %s, non-2xx %d, errors %d\n", sr.n, thousands(sr.rps()), ms(sr.p(50)), ms(sr.p(99)), sr.non2xx, sr.errs)
	// A fall is the collector returning the warm-up's peak, not a leak:
	// only growth fails (issue #15's 10%; issue #39 asks 5%).
	fmt.Printf("soak: RSS after %s warm-up %s, at the end %s (%+.1f%%; %s–%s over %d samples, every 15 s): growth ≤ 10%%: %s; ≤ 5%% (issue #39): %s\n",
		warm, mib(base), mib(rss1), 100*drift, mib(lo), mib(hi), len(samples), met(drift <= 0.1), met(drift <= 0.05))
	if drift > 0.1 || sr.non2xx+sr.errs > 0 {
		fail("soak: RSS drift %.1f%%, %d non-2xx, %d errors", 100*drift, sr.non2xx, sr.errs)
	}

}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// faults runs the disconnecting and stalling clients against s.
func faults(s *server) {
	// Clients that leave: write a whole request, close before the answer,
	// while 8 others keep loading the server.
	fmt.Println("\nclients that disconnect mid-request: 2,000, 32 at a time, beside 8 clients of /embed")
	bg := make(chan result)
	go func() { bg <- load(s.url+"/embed", body(), 8, 4*time.Second, 1<<30) }()
	var wg sync.WaitGroup
	var dialErrs atomic.Int64
	sem := make(chan struct{}, 32)
	big := bigBody()
	for i := range 2000 {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
			if err != nil {
				dialErrs.Add(1)
				return
			}
			b := body()
			if i%2 == 1 {
				b = big
			}
			fmt.Fprintf(c, "POST /embed HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", s.addr, len(b), b)
			if i%3 == 0 {
				time.Sleep(time.Duration(i%5) * time.Millisecond)
			}
			c.Close()
		}()
	}
	wg.Wait()
	r := <-bg
	fmt.Printf("  beside them: %d requests, %d non-2xx %v, %d errors; dial errors of the leavers: %d\n", r.n, r.non2xx, r.codes, r.errs, dialErrs.Load())
	if r.non2xx+r.errs+int(dialErrs.Load()) > 0 {
		fail("disconnecting clients disturbed the others")
	}
	if !s.healthy() {
		fail("server unhealthy after disconnecting clients")
	}

	// Stalled bodies: half of a declared body, then nothing.
	fmt.Printf("bodies that stall: 16 clients send headers and half a body, then wait (up to %s)\n", *stallWait)
	type cut struct {
		after time.Duration
		first string
		err   error
	}
	cuts := make(chan cut, 16)
	start := time.Now()
	for range 16 {
		go func() {
			c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
			if err != nil {
				cuts <- cut{err: err}
				return
			}
			defer c.Close()
			b := body()
			fmt.Fprintf(c, "POST /embed HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", s.addr, len(b), b[:len(b)/2])
			c.SetReadDeadline(time.Now().Add(*stallWait))
			line, err := bufio.NewReader(c).ReadString('\n')
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				cuts <- cut{after: time.Since(start), err: err}
				return
			}
			cuts <- cut{after: time.Since(start), first: strings.TrimSpace(line)}
		}()
	}
	// Others are served meanwhile.
	time.Sleep(time.Second)
	during := load(s.url+"/embed", body(), 4, 2*time.Second, 1<<30)
	fmt.Printf("  while they stall: %d requests of 4 other clients, p50 %s, %d non-2xx, %d errors\n", during.n, ms(during.p(50)), during.non2xx, during.errs)
	if during.n == 0 || during.non2xx+during.errs > 0 {
		fail("stalled bodies blocked other clients")
	}
	var times []time.Duration
	answers := map[string]int{}
	for range 16 {
		c := <-cuts
		if c.err != nil {
			fail("stalled client: %v", c.err)
			continue
		}
		times = append(times, c.after)
		if c.first == "" {
			c.first = "(connection closed, no answer)"
		}
		answers[c.first]++
	}
	if len(times) > 0 {
		slices.Sort(times)
		fmt.Printf("  cut by the server after %.1f–%.1f s; answers: %v\n", times[0].Seconds(), times[len(times)-1].Seconds(), answers)
	}
	if answers["HTTP/1.1 408 Request Timeout"] != 16 {
		fail("stalled bodies: %v; want 16 answers 408", answers)
	}
	if !s.healthy() {
		fail("server unhealthy after stalled bodies")
	}
}

// sigterm loads s, sends SIGTERM with slow requests in flight, and checks
// that they finish, that while they run (the drain) new requests get 503
// with TEI's error_type Unhealthy on an open port (no connection errors),
// and that the process exits with 0.
func sigterm(s *server) {
	fmt.Println("\nSIGTERM under load: 32 clients on /embed, 16 requests of 32 long inputs in flight")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bg sync.WaitGroup
	var ok2xx, non2xx, errsBefore atomic.Int64
	var sent atomic.Bool
	var mu sync.Mutex
	var afterCodes []timedCode // the 32 clients' answers and errors after SIGTERM
	for range 32 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			cl := &http.Client{Timeout: 40 * time.Second}
			for i := 0; i < 1_000_000 && ctx.Err() == nil; i++ {
				resp, err := cl.Post(s.url+"/embed", "application/json", strings.NewReader(body()))
				code := 0
				if err == nil {
					var e struct {
						ErrorType string `json:"error_type"`
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
					if code == 503 && (json.Unmarshal(b, &e) != nil || e.ErrorType != "Unhealthy") {
						code = -503 // a 503 without TEI's Unhealthy
					}
				}
				if sent.Load() {
					mu.Lock()
					afterCodes = append(afterCodes, timedCode{time.Now(), code})
					mu.Unlock()
					if code != 200 {
						time.Sleep(10 * time.Millisecond) // Retry-After, shortened
					}
					continue
				}
				switch {
				case err != nil:
					errsBefore.Add(1)
				case code/100 == 2:
					ok2xx.Add(1)
				default:
					non2xx.Add(1)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	// The in-flight ones: wait until each has written its body.
	type answer struct {
		code int
		at   time.Time
		err  error
	}
	// A request is in flight once the server's handler has begun it: each
	// is sent with Expect: 100-continue, and its body only after the
	// server's "100 Continue" (net/http writes it when the handler starts
	// reading the body).
	inflight := make(chan answer, 16)
	var written sync.WaitGroup
	big := bigBody()
	for range 16 {
		written.Add(1)
		go func() {
			c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
			if err != nil {
				written.Done()
				inflight <- answer{err: err, at: time.Now()}
				return
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(40 * time.Second))
			br := bufio.NewReader(c)
			_, err = fmt.Fprintf(c, "POST /embed HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", s.addr, len(big))
			if err == nil {
				var line string
				if line, err = br.ReadString('\n'); err == nil && !strings.HasPrefix(line, "HTTP/1.1 100") {
					err = fmt.Errorf("answer before the body: %q", strings.TrimSpace(line))
				}
				if err == nil {
					_, err = br.ReadString('\n') // the blank line after it
				}
			}
			if err == nil {
				_, err = io.WriteString(c, big)
			}
			written.Done()
			if err != nil {
				inflight <- answer{err: err, at: time.Now()}
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				inflight <- answer{err: err, at: time.Now()}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			inflight <- answer{code: resp.StatusCode, at: time.Now()}
		}()
	}
	written.Wait()
	sent.Store(true)
	t0 := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	// A new client 300 ms later: the port is open, /health and /embed say 503.
	time.Sleep(300 * time.Millisecond)
	probe := map[string]string{}
	for _, c := range []struct{ method, path, body string }{{"GET", "/health", ""}, {"POST", "/embed", body()}} {
		req, _ := http.NewRequest(c.method, s.url+c.path, strings.NewReader(c.body))
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			probe[c.path] = "error: " + err.Error()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		probe[c.path] = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	codes := map[string]int{}
	var last time.Time
	for range 16 {
		a := <-inflight
		if a.err != nil {
			codes["error: "+a.err.Error()]++
		} else {
			codes[strconv.Itoa(a.code)]++
		}
		if a.at.After(last) {
			last = a.at
		}
	}
	exit := make(chan error, 1)
	go func() { exit <- s.cmd.Wait() }()
	var werr error
	select {
	case werr = <-exit:
	case <-time.After(40 * time.Second):
		werr = errors.New("still running 40 s after SIGTERM")
		s.cmd.Process.Kill()
		<-exit
	}
	exited := time.Since(t0)
	s.done = true
	cancel()
	bg.Wait()
	// The drain: from SIGTERM to the last in-flight answer (the server
	// closes its port only after that one is written).
	during, after := map[int]int{}, map[int]int{}
	for _, c := range afterCodes {
		if c.at.Before(last) {
			during[c.code]++
		} else {
			after[c.code]++
		}
	}
	fmt.Printf("  in-flight answers: %v, the last %.2f s after SIGTERM\n", codes, last.Sub(t0).Seconds())
	fmt.Printf("  a new client 300 ms after SIGTERM: GET /health → %s; POST /embed → %s\n", probe["/health"], probe["/embed"])
	fmt.Printf("  the 32 clients during the drain, by status (0: connection error, -503: a 503 not TEI's Unhealthy): %v; after it: %v\n", during, after)
	fmt.Printf("  exit after %.2f s: %v\n", exited.Seconds(), exitText(werr))
	fmt.Printf("  before SIGTERM: %d 2xx, %d non-2xx, %d errors\n", ok2xx.Load(), non2xx.Load(), errsBefore.Load())
	if codes["200"] != 16 {
		fail("not every in-flight request got its 200: %v", codes)
	}
	for path, want := range map[string]string{"/health": "503 {", "/embed": "503 {"} {
		if !strings.HasPrefix(probe[path], want) || !strings.Contains(probe[path], `"error_type":"Unhealthy"`) {
			fail("%s during the drain: %s; want 503 with error_type Unhealthy", path, probe[path])
		}
	}
	for code, n := range during {
		if code != 503 && code != 200 {
			fail("during the drain, %d answers %d (want only 503 Unhealthy, or 200 for requests already in)", n, code)
		}
	}
	if during[503] == 0 {
		fail("no client got a 503 during the drain")
	}
	if werr != nil {
		fail("exit: %v", werr)
	}
	if non2xx.Load()+errsBefore.Load() > 0 {
		fail("non-2xx or errors before SIGTERM")
	}
	if strings.Contains(s.log.String(), "panic") || strings.Contains(s.log.String(), "goroutine ") {
		fail("server log has a panic:\n%s", s.log.String())
	}
}

// timedCode is an answer's status (0: a connection error) and when it came.
type timedCode struct {
	at   time.Time
	code int
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

type server struct {
	cmd  *exec.Cmd
	addr string
	url  string
	log  *syncBuffer
	done bool
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func startServer(dir string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &server{addr: addr, url: "http://" + addr, log: &syncBuffer{}}
	s.cmd = exec.Command(*bin, "serve", "--model", dir, "--addr", addr, "--threads", strconv.Itoa(*threads))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	step("starting %s", strings.Join(s.cmd.Args, " "))
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if s.healthy() {
			// Warm up.
			load(s.url+"/embed", body(), 2, time.Second, 1<<20)
			return s, nil
		}
	}
	s.kill()
	return nil, fmt.Errorf("server not healthy after 2 minutes:\n%s", s.log.String())
}

func (s *server) healthy() bool {
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(s.url + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func (s *server) kill() {
	if !s.done {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.done = true
	}
}

// stop ends s with SIGTERM, as an orchestrator would.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
		s.done = true
	case <-time.After(40 * time.Second):
		s.kill()
	}
}

func (s *server) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

// atRest waits for idle connections to be gone (the clients close theirs)
// and returns the server's goroutines and open files.
func (s *server) atRest() (goroutines, fds int) {
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	time.Sleep(time.Second)
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get(s.url + "/metrics")
	if err == nil {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				goroutines = int(f)
			}
		}
		resp.Body.Close()
	}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid))
	return goroutines, len(ents)
}

type result struct {
	n, non2xx, errs int
	codes           map[int]int // the non-2xx answers by status
	took            time.Duration
	lat             []time.Duration
}

func (r result) rps() float64 {
	if r.took <= 0 {
		return 0
	}
	return float64(r.n) / r.took.Seconds()
}

func (r result) p(q int) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	i := (len(r.lat)*q + 99) / 100
	return r.lat[min(max(i-1, 0), len(r.lat)-1)]
}

// load runs c clients, each posting b to url in a loop until d has passed
// or maxN requests were made by all of them together.
func load(url, b string, c int, d time.Duration, maxN int) result {
	return loadEach(url, func(int, int) (string, string) { return url, b }, c, d, maxN)
}

// loadEach is load with request i of client k made by req (its URL and
// body); name labels the progress line.
func loadEach(name string, req func(k, i int) (string, string), c int, d time.Duration, maxN int) result {
	tr := &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var count atomic.Int64
	lats := make([][]time.Duration, c)
	non2xx := make([]int, c)
	codes := make([]map[int]int, c)
	errs := make([]int, c)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for k := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline) && count.Add(1) <= int64(maxN); i++ {
				url, b := req(k, i)
				t := time.Now()
				resp, err := cl.Post(url, "application/json", strings.NewReader(b))
				if err != nil {
					errs[k]++
					time.Sleep(10 * time.Millisecond)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lats[k] = append(lats[k], time.Since(t))
				if resp.StatusCode/100 != 2 {
					non2xx[k]++
					if codes[k] == nil {
						codes[k] = map[int]int{}
					}
					codes[k][resp.StatusCode]++
				}
			}
		}()
	}
	wg.Wait()
	r := result{took: time.Since(start), codes: map[int]int{}}
	for k := range c {
		for code, n := range codes[k] {
			r.codes[code] += n
		}
		r.lat = append(r.lat, lats[k]...)
		r.non2xx += non2xx[k]
		r.errs += errs[k]
	}
	r.n = len(r.lat)
	slices.Sort(r.lat)
	step("%s c=%d: %d requests, %s req/s, p50 %s, p99 %s, non-2xx %d %v, errors %d", name, c, r.n, thousands(r.rps()), ms(r.p(50)), ms(r.p(99)), r.non2xx, r.codes, r.errs)
	return r
}

func body() string { return `{"inputs": "` + text + `"}` }

// soakMaxWords is the longest text of the soak: past the 512 positions of
// the models here (pretrain's and finetune's), so some are truncated.
const soakMaxWords = 600

// mixedRequest makes the soak's requests: client k's request i goes to
// /embed or /v1/embeddings in turn, with a text of 1 to soakMaxWords words
// drawn from a fixed sequence (lengths spread as 1 + (i·7919 + k·104729)
// mod soakMaxWords): /embed truncates the longer ones (truncate: true);
// OpenAI's route refuses an input past the model's length (400, as
// OpenAI's API does), so it gets at most 400 words (subwords included, within 512 tokens).
func mixedRequest(base string) func(k, i int) (string, string) {
	words := strings.Fields(strings.TrimSuffix(text, " ."))
	return func(k, i int) (string, string) {
		n := 1 + (i*7919+k*104729)%soakMaxWords
		if i%2 == 1 {
			n = min(n, 400)
		}
		ws := make([]string, n)
		for j := range ws {
			ws[j] = words[(j+i)%len(words)]
		}
		t := strings.Join(ws, " ")
		if i%2 == 0 {
			return base + "/embed", `{"inputs": "` + t + `", "truncate": true}`
		}
		return base + "/v1/embeddings", `{"input": "` + t + `"}`
	}
}

// bigBody is 32 inputs of about 120 tokens: a request that takes a while.
func bigBody() string {
	long := strings.TrimSpace(strings.Repeat(strings.TrimSuffix(text, " .")+" ", 9)) + " ."
	ins := make([]string, 32)
	for i := range ins {
		ins[i] = strconv.Quote(long)
	}
	return `{"inputs": [` + strings.Join(ins, ",") + `]}`
}

type bare struct {
	seq int
	d   time.Duration
}

// bareForward times Forward of the text alone: `roformer bench --head base`
// at the text's token count ([CLS] and [SEP] included, as the server runs it).
func bareForward(dir string) (bare, error) {
	seq := 17
	s, err := startServer(dir)
	if err == nil {
		resp, err := http.Post(s.url+"/embed", "application/json", strings.NewReader(body()))
		if err == nil {
			if n, err := strconv.Atoi(resp.Header.Get("x-compute-tokens")); err == nil && n > 0 {
				seq = n
			}
			resp.Body.Close()
		}
		s.stop()
	}
	out, err := exec.Command(*bin, "bench", "--model", dir, "--head", "base", "--batch", "1", "--seq", strconv.Itoa(seq),
		"--steps", "200", "--threads", strconv.Itoa(*threads), "--peak-gflops", "1", "--json", "--quiet").Output()
	if err != nil {
		return bare{}, fmt.Errorf("roformer bench: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res struct {
		MsPerStep float64 `json:"ms_per_step"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return bare{}, fmt.Errorf("roformer bench output: %v", err)
	}
	return bare{seq, time.Duration(res.MsPerStep * float64(time.Millisecond))}, nil
}

func trainFile() []byte {
	words := strings.Fields("the president of the united states said that economy was good bad market fell rose people")
	var b bytes.Buffer
	for i := range 64 {
		var t []string
		for j := range 8 {
			t = append(t, words[(i*7+j*3+i*j)%len(words)])
		}
		label := "neg"
		if i%2 == 0 {
			label = "pos"
		}
		fmt.Fprintf(&b, "{\"text\": %q, \"label\": %q}\n", strings.Join(t, " "), label)
	}
	return b.Bytes()
}

func command(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// cpuName asks the binary under test (`roformer env`'s cpu line, from
// blas.CPU) rather than describing the CPU here: this program imports
// nothing of the module and talks to the binary only, and so the report
// names the CPU in the same words as the experiments' results files.
func cpuName() string {
	out, err := exec.Command(*bin, "env").Output()
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "cpu "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func thousands(f float64) string {
	n := int64(f + 0.5)
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// scrapeMetrics reads s's GET /metrics into a map from each sample's name
// with its labels (as written) to its value.
func scrapeMetrics(s *server) (map[string]float64, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(s.url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out, sc.Err()
}

// forwardTimes runs `roformer bench --head base` at batch×seq on the given
// threads and returns the median and the fastest step and the FLOPs of one.
func forwardTimes(batch, seq, threads, steps int) (median, fastest time.Duration, flops float64, err error) {
	out, err := exec.Command(*bin, "bench", "--model", *model, "--head", "base", "--batch", strconv.Itoa(batch), "--seq", strconv.Itoa(seq),
		"--steps", strconv.Itoa(steps), "--threads", strconv.Itoa(threads), "--peak-gflops", "1", "--json", "--quiet").Output()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("roformer bench: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res struct {
		MsPerStep float64 `json:"ms_per_step"`
		MsMin     float64 `json:"ms_min"`
		Flops     float64 `json:"flops_per_step"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return 0, 0, 0, fmt.Errorf("roformer bench output: %v", err)
	}
	msd := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	return msd(res.MsPerStep), msd(res.MsMin), res.Flops, nil
}

// profile prints where the time of a one-text /embed request goes with 1
// and with 64 clients, and the bare forward at the batch sizes the
// scheduler forms: what bounds the ratio of their throughputs.
func profile(s *server) error {
	seq := 17 // [CLS] + the text's 15 tokens + [SEP]
	fmt.Printf("\nprofile: the bare forward (roformer bench --head base --seq %d), median and fastest of the steps\n\n", seq)
	fmt.Println("| batch | threads | median ms | fastest ms | fastest ms per text | GFLOP/s (fastest) |\n|---|---|---|---|---|---|")
	for _, b := range []int{1, 32, 64} {
		for _, th := range []int{1, 2} {
			steps := map[int]int{1: 200, 32: 40, 64: 20}[b]
			med, fast, flops, err := forwardTimes(b, seq, th, steps)
			if err != nil {
				return err
			}
			fmt.Printf("| %d | %d | %.2f | %.2f | %.3f | %.1f |\n", b, th, float64(med)/1e6, float64(fast)/1e6,
				float64(fast)/1e6/float64(b), flops/fast.Seconds()/1e9)
		}
	}
	fmt.Printf("\nprofile: /embed, one text a request, %s per client count; times are means per request\n\n", *profileDur)
	fmt.Println("| clients | req/s | client latency | server: whole request | tokenization | queue | inference (its batch's forward) | " +
		"mean batch | forward busy | server CPU | load-generator CPU |\n|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range []int{1, 64} {
		m0, err := scrapeMetrics(s)
		if err != nil {
			return err
		}
		cpu0 := cpuSelf()
		r := load(s.url+"/embed", body(), c, *profileDur, *maxRequests)
		cpu1 := cpuSelf()
		m1, err := scrapeMetrics(s)
		if err != nil {
			return err
		}
		d := func(k string) float64 { return m1[k] - m0[k] }
		mean := func(name string) time.Duration {
			n := d(name + "_count")
			if n == 0 {
				return 0
			}
			return time.Duration(d(name+"_sum") / n * 1e9)
		}
		var sumLat time.Duration
		for _, l := range r.lat {
			sumLat += l
		}
		lat := time.Duration(0)
		if len(r.lat) > 0 {
			lat = sumLat / time.Duration(len(r.lat))
		}
		whole := time.Duration(0)
		if n := d(`te_request_duration_count{route="/embed",status="200"}`); n > 0 {
			whole = time.Duration(d(`te_request_duration_sum{route="/embed",status="200"}`) / n * 1e9)
		}
		batches := d("te_batch_next_size_count")
		meanBatch := 0.0
		if batches > 0 {
			meanBatch = d("te_batch_next_size_sum") / batches
		}
		inf := mean("te_inference_duration")
		busy := batches * inf.Seconds() / r.took.Seconds()
		fmt.Printf("| %d | %s | %s | %s | %s | %s | %s | %.1f | %.0f%% | %.2f cores | %.2f cores |\n", c, thousands(r.rps()), ms(lat), ms(whole),
			ms(mean("te_tokenization_duration")), ms(mean("te_queue_duration")), ms(inf), meanBatch, 100*busy,
			d("process_cpu_seconds_total")/r.took.Seconds(), (cpu1-cpu0).Seconds()/r.took.Seconds())
	}
	return nil
}
