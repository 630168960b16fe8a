package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/roformer-go/roformer/model/roformer"
)

// TestWebPageFiles checks that GET / answers the page and GET /web/… its
// files, and that the rest of / stays with the JSON catch-all.
func TestWebPageFiles(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	for _, c := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/", 200, "text/html", `<script src="/web/app.js">`},
		{"HEAD", "/", 200, "text/html", ""},
		{"GET", "/web/app.js", 200, "javascript", "/v1/fill-mask"},
		{"GET", "/web/style.css", 200, "text/css", ".panel"},
		{"GET", "/web/", 404, "application/json", `"error"`},
		{"GET", "/web/nothing.js", 404, "", ""},
		{"POST", "/", 415, "application/json", `"error"`}, // the model's task (root.go), JSON only
		{"PUT", "/", 405, "application/json", `"error"`},
		{"GET", "/index.html", 404, "application/json", `"error"`},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.status || !strings.Contains(rec.Header().Get("Content-Type"), c.ctype) || !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("%s %s: %d %q %.80q; want %d %q containing %q", c.method, c.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), c.status, c.ctype, c.body)
		}
	}
	// No CDN, no external fonts or scripts: the page loads nothing but its own files.
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		b, err := webFiles.ReadFile("web/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"http://", "https://", "//cdn", "@import"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("web/%s refers to %q", name, bad)
			}
		}
	}
}

// chromium finds a Chromium binary: $ROFORMER_CHROMIUM, or one of the
// usual names on PATH ("" when none).
func chromium() string {
	if p := os.Getenv("ROFORMER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "chromium-headless-shell", "headless_shell", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts headless Chromium for the test; it skips the test when
// no Chromium is installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := chromium()
	if bin == "" {
		t.Skip("no Chromium found (apt-get install chromium, or set ROFORMER_CHROMIUM)")
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(ctx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Run(ctx); err != nil {
		t.Skipf("cannot start Chromium %s: %v", bin, err)
	}
	return ctx
}

// serve starts s on a loopback port for the browser.
func serve(t *testing.T, s http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(s) // 127.0.0.1
	t.Cleanup(ts.Close)
	return ts.URL
}

// typeInto empties the input sel and types text into it, key by key.
func typeInto(sel, text string) chromedp.Tasks {
	return chromedp.Tasks{
		chromedp.Evaluate(`document.querySelector(`+strconv.Quote(sel)+`).value = ""`, nil),
		chromedp.SendKeys(sel, text, chromedp.ByQuery),
	}
}

// visiblePanels is the ids of the page's panels that are shown.
const visiblePanels = `Array.from(document.querySelectorAll("section.panel")).filter(s => !s.hidden).map(s => s.id)`

// TestWebPageBrowser opens the page in headless Chromium against a live
// server with a masked-LM model: the panels the model serves are shown
// (fill-mask, not classification), fill-mask's results appear, and an
// error answer's message is shown. With ROFORMER_SCREENSHOT=path, it
// writes a PNG of the page there (docs/serve-page.png).
func TestWebPageBrowser(t *testing.T) {
	ctx := browser(t)
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{Name: "roformer-tiny-mlm"})
	url := serve(t, s)

	var panels []string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(`body[data-ready="true"]`),
		chromedp.Evaluate(visiblePanels, &panels),
	); err != nil {
		t.Fatal(err)
	}
	if want := []string{"fill-mask", "similarity", "embed", "tokenize"}; !slices.Equal(panels, want) {
		t.Errorf("panels shown %v; want %v", panels, want)
	}

	// An error answer: a text without [MASK] is a 400, its message shown.
	var msg string
	if err := chromedp.Run(ctx,
		typeInto(`#fill-mask input[name=text]`, "the whale sails"),
		chromedp.Click(`#fill-mask button`),
		chromedp.WaitVisible(`#fill-mask .error`),
		chromedp.Text(`#fill-mask .error`, &msg),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "no [MASK] token") {
		t.Errorf("error shown %q; want the API's message (no [MASK] token)", msg)
	}

	// Fill-mask: type a text, click, the top 3 appear and the error goes.
	var n int
	var first string
	var errHidden bool
	if err := chromedp.Run(ctx,
		typeInto(`#fill-mask input[name=text]`, "the [MASK] sails the sea ."),
		typeInto(`#fill-mask input[name=top_k]`, "3"),
		chromedp.Click(`#fill-mask button`),
		chromedp.WaitVisible(`#fill-mask ol.results li`),
		chromedp.Evaluate(`document.querySelectorAll("#fill-mask ol.results li").length`, &n),
		chromedp.Text(`#fill-mask ol.results li .label`, &first),
		chromedp.Evaluate(`document.querySelector("#fill-mask .error").hidden`, &errHidden),
	); err != nil {
		t.Fatal(err)
	}
	if n != 3 || first == "" || !errHidden {
		t.Errorf("fill-mask: %d results (first %q), error hidden %v; want 3, a token, true", n, first, errHidden)
	}

	// The other panels answer too (and fill the screenshot).
	for _, id := range []string{"similarity", "embed", "tokenize"} {
		sel := "ol.results li"
		if id == "tokenize" {
			sel = ".tokens .tok"
		}
		if err := chromedp.Run(ctx,
			chromedp.Click(`#`+id+` button`),
			chromedp.WaitVisible(`#`+id+` `+sel),
		); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}

	if path := os.Getenv("ROFORMER_SCREENSHOT"); path != "" {
		var png []byte
		if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", path, len(png))
	}
}

// TestWebPageBrowserClassifier: with a one-label classifier (a reranker),
// the page shows classification and rerank, not fill-mask, and both answer.
func TestWebPageBrowserClassifier(t *testing.T) {
	ctx := browser(t)
	s, _, _ := newServer(t, roformer.HeadSequenceCls, []string{"relevant"}, Options{})
	url := serve(t, s)
	var panels []string
	var label string
	var ranks int
	if err := chromedp.Run(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(`body[data-ready="true"]`),
		chromedp.Evaluate(visiblePanels, &panels),
		chromedp.Click(`#predict button`),
		chromedp.WaitVisible(`#predict ol.results li`),
		chromedp.Text(`#predict ol.results li .label`, &label),
		chromedp.Click(`#rerank button`),
		chromedp.WaitVisible(`#rerank ol.results li`),
		chromedp.Evaluate(`document.querySelectorAll("#rerank ol.results li").length`, &ranks),
	); err != nil {
		t.Fatal(err)
	}
	if want := []string{"similarity", "rerank", "predict", "embed", "tokenize"}; !slices.Equal(panels, want) {
		t.Errorf("panels shown %v; want %v", panels, want)
	}
	if label != "relevant" || ranks != 3 {
		t.Errorf("predict's first label %q, rerank's %d rows; want relevant, 3", label, ranks)
	}
}

// TestWebPageBrowserGenerate: with a causal-LM model, the page shows the
// generation panel, which streams POST /generate's events into the page
// token by token; their texts join to the generated text of the same
// request not streamed.
func TestWebPageBrowserGenerate(t *testing.T) {
	ctx := browser(t)
	s, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{})
	var want GenerateResponse
	if code, kind := teiCall(t, s, "/generate", `{"inputs": "the whale", "parameters": {"max_new_tokens": 5}}`, &want); code != 200 {
		t.Fatalf("POST /generate: %d %s", code, kind)
	}
	url := serve(t, s)
	var panels []string
	var toks int
	var got, shown, prompt string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(`body[data-ready="true"]`),
		chromedp.Evaluate(visiblePanels, &panels),
		typeInto(`#generate input[name=text]`, "the whale"),
		typeInto(`#generate input[name=max_new_tokens]`, "5"),
		chromedp.Click(`#generate button`),
		chromedp.WaitVisible(`#generate .generated:not(.streaming) .gen-tok`),
		chromedp.Evaluate(`document.querySelectorAll("#generate .gen-tok").length`, &toks),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#generate .gen-tok")).map(e => e.textContent).join("")`, &got),
		chromedp.Evaluate(`document.querySelector("#generate .generated").textContent`, &shown),
		chromedp.Text(`#generate .generated .prompt`, &prompt),
	); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(panels, "generate") {
		t.Errorf("panels shown %v; want generate among them", panels)
	}
	if toks < 1 || toks > 5 || got != want.GeneratedText || prompt != "the whale" || shown != "the whale"+want.GeneratedText {
		t.Errorf("%d tokens shown joining to %q (prompt %q, all %q); want 1–5 joining to %q after the prompt", toks, got, prompt, shown, want.GeneratedText)
	}
	// An error answer before the stream (no text: 422) is shown.
	var msg string
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(`document.querySelector("#generate input[name=text]").value = ""`, nil),
		chromedp.Click(`#generate button`),
		chromedp.WaitVisible(`#generate .error`),
		chromedp.Text(`#generate .error`, &msg),
	); err != nil {
		t.Fatal(err)
	}
	if msg == "" {
		t.Error("no error shown for an empty prompt")
	}
}

// TestWebPageBrowserTokenClassification: with a token classifier, the
// page shows the entities panel; with "Ignore O" off and aggregation none,
// every token is an entity, marked in the text at its character offsets
// with its label, as POST /v1/token-classification answers.
func TestWebPageBrowserTokenClassification(t *testing.T) {
	ctx := browser(t)
	s, _, _ := newServer(t, roformer.HeadTokenCls, []string{"O", "B-PER", "I-PER", "B-LOC", "I-LOC"}, Options{})
	var want []struct {
		Entity     string
		Start, End int
	}
	const text = "the whales sail the sea ."
	if code, kind := teiCall(t, s, "/v1/token-classification", `{"inputs": "`+text+`", "ignore_labels": [], "aggregation_strategy": "none"}`, &want); code != 200 || len(want) == 0 {
		t.Fatalf("POST /v1/token-classification: %d %s %v", code, kind, want)
	}
	url := serve(t, s)
	var panels []string
	var marks []map[string]string
	var para string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(`body[data-ready="true"]`),
		chromedp.Evaluate(visiblePanels, &panels),
		typeInto(`#token-classification input[name=text]`, text),
		chromedp.SetValue(`#token-classification select[name=aggregation]`, "none", chromedp.ByQuery),
		chromedp.Click(`#token-classification input[name=ignore_o]`),
		chromedp.Click(`#token-classification button`),
		chromedp.WaitVisible(`#token-classification mark.ent`),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#token-classification mark.ent")).map(m => ({label: m.dataset.label, text: m.firstChild.textContent}))`, &marks),
		chromedp.Evaluate(`Array.from(document.querySelector("#token-classification .tagged").childNodes).map(n => n.nodeType === 3 ? n.textContent : n.firstChild.textContent).join("")`, &para),
	); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(panels, "token-classification") || slices.Contains(panels, "generate") {
		t.Errorf("panels shown %v; want token-classification, not generate", panels)
	}
	if len(marks) != len(want) {
		t.Fatalf("%d entities marked %v; want %d %v", len(marks), marks, len(want), want)
	}
	runes := []rune(text)
	for i, w := range want {
		if marks[i]["label"] != w.Entity || marks[i]["text"] != string(runes[w.Start:w.End]) {
			t.Errorf("mark %d: %v; want %s %q", i, marks[i], w.Entity, string(runes[w.Start:w.End]))
		}
	}
	if para != text {
		t.Errorf("the marked paragraph reads %q; want the text %q", para, text)
	}
}

// TestWebPageBrowserQuestionAnswering: with a question-answering model the
// page shows its panel (and not the others' model panels); the answers
// appear best first as POST /v1/question-answering gives them, and the best
// one is marked in the context at its character offsets.
func TestWebPageBrowserQuestionAnswering(t *testing.T) {
	ctx := browser(t)
	s, _, _ := newServer(t, roformer.HeadQA, nil, Options{})
	const question, context = "where is the whale?", "the whale sails the sea . a ship . the whales"
	var want []struct {
		Score      float64
		Start, End int
		Answer     string
	}
	body := `{"question": "` + question + `", "context": "` + context + `", "top_k": 2}`
	if code, kind := teiCall(t, s, "/v1/question-answering", body, &want); code != 200 || len(want) != 2 {
		t.Fatalf("POST /v1/question-answering: %d %s %v", code, kind, want)
	}
	url := serve(t, s)
	var panels, labels []string
	var marked, para string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(`body[data-ready="true"]`),
		chromedp.Evaluate(visiblePanels, &panels),
		typeInto(`#question-answering input[name=question]`, question),
		chromedp.SetValue(`#question-answering textarea[name=context]`, context, chromedp.ByQuery),
		typeInto(`#question-answering input[name=top_k]`, "2"),
		chromedp.Click(`#question-answering button`),
		chromedp.WaitVisible(`#question-answering ol.results li`),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#question-answering ol.results li .label")).map(e => e.textContent)`, &labels),
		chromedp.Evaluate(`(document.querySelector("#question-answering mark.answer") || {}).textContent || ""`, &marked),
		chromedp.Evaluate(`document.querySelector("#question-answering .tagged").textContent`, &para),
	); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(panels, "question-answering") || slices.Contains(panels, "fill-mask") || slices.Contains(panels, "token-classification") {
		t.Errorf("panels shown %v; want question-answering, not fill-mask or token-classification", panels)
	}
	for i, w := range want {
		label := w.Answer
		if label == "" {
			label = "(no answer)"
		}
		if i >= len(labels) || labels[i] != label {
			t.Errorf("answers shown %q; want %q at %d", labels, label, i)
		}
	}
	if runes := []rune(context); marked != string(runes[want[0].Start:want[0].End]) || marked == "" {
		t.Errorf("marked %q; want the best answer %q at %d–%d", marked, want[0].Answer, want[0].Start, want[0].End)
	}
	if para != context {
		t.Errorf("the marked context reads %q; want %q", para, context)
	}
}

// TestWebPageBrowserKey: with an API key (and the loopback Host rule),
// the page, served without the key, asks for it, then sends it with every
// request: the panels appear and fill-mask answers.
func TestWebPageBrowserKey(t *testing.T) {
	ctx := browser(t)
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{APIKey: "k3y", LoopbackOnly: true})
	url := serve(t, s)
	var panels []string
	var n int
	if err := chromedp.Run(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(`#key input[name=key]`),
		chromedp.SendKeys(`#key input[name=key]`, "k3y", chromedp.ByQuery),
		chromedp.Click(`#key button`),
		chromedp.WaitVisible(`body[data-ready="true"]`),
		chromedp.Evaluate(visiblePanels, &panels),
		typeInto(`#fill-mask input[name=text]`, "the [MASK] sails the sea ."),
		chromedp.Click(`#fill-mask button`),
		chromedp.WaitVisible(`#fill-mask ol.results li`),
		chromedp.Evaluate(`document.querySelectorAll("#fill-mask ol.results li").length`, &n),
	); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(panels, "fill-mask") || n == 0 {
		t.Errorf("with the key: panels %v, %d fill-mask results", panels, n)
	}
}
