package tasks

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pair is one verse in two languages.
type Pair struct {
	Ref string // OSIS reference: book.chapter.verse, "Gen.1.1"
	Src string // the source side: English, King James Version
	Tgt string // the target side: Spanish, Reina-Valera 1909
}

// Parallel is a parallel corpus split by whole books.
type Parallel struct {
	Train, Dev, Test []Pair
	// DevBooks and TestBooks are the OSIS names of the held-out books.
	DevBooks, TestBooks []string
	// Dropped counts verses left out while building, by reason.
	Dropped map[string]int
}

// The held-out books of BibleParallel. Each split mixes Old Testament
// narrative, a gospel or letters, so that it is neither all poetry nor all
// genealogy. John is the test gospel rather than one of the synoptic ones,
// whose many near-identical verses in Matthew and Luke would sit in train.
var (
	BibleDevBooks  = []string{"Ruth", "Jonah", "Gal", "Jas"}
	BibleTestBooks = []string{"Esth", "John", "Phil"}
)

var sparvSource = Source{Kind: "deb", Package: "sword-text-sparv", Version: "2.60-1", Files: "usr/share/sword/modules/texts/ztext/spaRV1909eb/{ot,nt}.*"}

// BibleSources are the packages BibleParallel reads: the King James Version
// and the Reina-Valera 1909 as SWORD modules.
var BibleSources = []Source{
	{Kind: "deb", Package: kjvSource.Package, Version: kjvSource.Version, Files: "usr/share/sword/modules/texts/ztext/engKJV2006eb/{ot,nt}.*"},
	sparvSource,
}

// BibleParallel returns the English–Spanish Bible: every verse of the King
// James Version (1769 text; Debian sword-text-kjv 14.3-1) paired with the
// same verse of the Reina-Valera 1909 (Debian sword-text-sparv 2.60-1), both
// public domain. It fetches the two packages into cacheDir on first use
// (apt-get download, pinned by SHA-256; progress to log) and builds the
// corpus with BuildBibleParallel.
//
// The KJV rather than the World English Bible: both SWORD modules use the
// KJV versification, so a reference names the same verse in both and
// every verse has a partner (the WEB module uses the NRSVA versification,
// whose verse numbers differ in places), and the KJV's early-modern
// English is nearer in age and literalness to the 1909 Spanish.
//
// With the pinned packages it holds 31,084 pairs: train 29,545, dev 389
// (Ruth, Jonah, Galatians, James), test 1,150 (Esther, John, Philippians);
// the 18 verses that are empty in the Spanish module are dropped.
func BibleParallel(ctx context.Context, cacheDir string, log io.Writer) (*Parallel, error) {
	for _, s := range BibleSources {
		if err := Fetch(ctx, s, cacheDir, log); err != nil {
			return nil, err
		}
	}
	return BuildBibleParallel(os.DirFS(cacheDir))
}

// readBibleModule reads the verses of a SWORD zText module of the package
// src unpacked in fsys, both testaments: their references in canonical
// order and their cleaned texts by reference.
func readBibleModule(fsys fs.FS, src Source, module string) ([]string, map[string]string, error) {
	dir := path.Join(src.Dir(), "usr", "share", "sword", "modules", "texts", "ztext", module)
	var refs []string
	text := map[string]string{}
	for _, t := range []string{"ot", "nt"} {
		z, err := ReadZText(fsys, dir, t)
		if err != nil {
			return nil, nil, err
		}
		r, m, err := z.versesText(true)
		if err != nil {
			return nil, nil, err
		}
		refs = append(refs, r...)
		for k, v := range m {
			text[k] = v
		}
	}
	return refs, text, nil
}

// BuildBibleParallel builds the corpus of BibleParallel from the unpacked
// packages in fsys (rooted at the cache folder, each package under its
// Source.Dir). Pairs come in canonical order (Genesis to Revelation); the
// result is the same on every run.
//
// Cleaning, beyond OSISText's (markup, notes and headings removed, entities
// decoded, white space collapsed):
//   - English: the psalms' superscriptions, which the KJV module marks as
//     canonical titles and the Spanish one holds in verse 1, are kept at the
//     start of verse 1; the paragraph signs ¶ are removed.
//   - Spanish: the capitalised first word of a chapter ("EN el principio")
//     is written as a word ("En el principio"), and the names of the Hebrew
//     letters that head each stanza of Psalm 119 ("ALEPH.", "BETH"), which
//     the KJV module keeps in headings, are removed.
//
// A verse empty on either side (after cleaning) is dropped.
func BuildBibleParallel(fsys fs.FS) (*Parallel, error) {
	enRefs, en, err := readBibleModule(fsys, BibleSources[0], "engKJV2006eb")
	if err != nil {
		return nil, fmt.Errorf("tasks: bible: %w", err)
	}
	_, es, err := readBibleModule(fsys, BibleSources[1], "spaRV1909eb")
	if err != nil {
		return nil, fmt.Errorf("tasks: bible: %w", err)
	}
	cs := countCasing(es)
	held := map[string]int{}
	for _, b := range BibleDevBooks {
		held[b] = 1
	}
	for _, b := range BibleTestBooks {
		held[b] = 2
	}
	p := &Parallel{DevBooks: BibleDevBooks, TestBooks: BibleTestBooks, Dropped: map[string]int{}}
	seen := map[string]bool{}
	for _, ref := range enRefs {
		s, ok := es[ref]
		if !ok {
			p.Dropped["verse missing in the Spanish module"]++
			continue
		}
		book := ref[:strings.IndexByte(ref, '.')]
		seen[book] = true
		pair := Pair{Ref: ref, Src: cleanEnglish(en[ref]), Tgt: cleanSpanish(ref, s, cs)}
		if pair.Src == "" || pair.Tgt == "" {
			p.Dropped["verse empty in one translation"]++
			continue
		}
		switch held[book] {
		case 1:
			p.Dev = append(p.Dev, pair)
		case 2:
			p.Test = append(p.Test, pair)
		default:
			p.Train = append(p.Train, pair)
		}
	}
	for b := range held {
		if !seen[b] {
			return nil, fmt.Errorf("tasks: bible: held-out book %q has no verse in the modules", b)
		}
	}
	if len(p.Train) == 0 {
		return nil, fmt.Errorf("tasks: bible: no training pair")
	}
	return p, nil
}

// cleanEnglish removes the KJV's paragraph signs.
func cleanEnglish(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "¶", "")), " ")
}

// hebrewLetters are the stanza heads of Psalm 119 as the Reina-Valera
// spells them.
var hebrewLetters = map[string]bool{"ALEPH": true, "BETH": true, "GIMEL": true, "DALETH": true, "HE": true, "VAU": true,
	"ZAIN": true, "CHETH": true, "TETH": true, "JOD": true, "CAPH": true, "LAMED": true, "MEM": true, "NUN": true,
	"SAMECH": true, "AIN": true, "PE": true, "TZADDI": true, "COPH": true, "KOPH": true, "RESH": true, "SIN": true,
	"SCHIN": true, "SHIN": true, "TAU": true}

// casing counts how a word is written inside sentences: key the word in
// lower case, value [lower-case uses, capitalised uses].
type casing map[string]*[2]int

// countCasing counts the casing of every word of texts that is neither
// first in its text nor after . ! ? (where any word is capitalised) nor all
// in capitals.
func countCasing(texts map[string]string) casing {
	c := casing{}
	for _, t := range texts {
		initial := true
		for _, w := range strings.Fields(t) {
			core := letters(w)
			if core != "" && !initial && !capsWord(core) {
				r, _ := utf8.DecodeRuneInString(core)
				k := strings.ToLower(core)
				if c[k] == nil {
					c[k] = &[2]int{}
				}
				if unicode.IsUpper(r) {
					c[k][1]++
				} else {
					c[k][0]++
				}
			}
			if core != "" {
				initial = false
			}
			if strings.ContainsAny(w, ".!?") {
				initial = true
			}
		}
	}
	return c
}

// letters is w without the punctuation around it.
func letters(w string) string {
	return strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// cleanSpanish undoes the Reina-Valera's typesetting of chapter openings:
// verse 1 of a chapter (and each stanza of Psalm 119) opens with its first
// words in capitals ("EN el principio", "Y ACONTECIÓ", "DE SIETE años"),
// and Psalm 119's stanzas start with the letter's name. The run of words in
// capitals that starts at the first such word is recased: a word that
// starts a sentence is capitalised, any other is written as the corpus
// mostly writes it inside sentences (lower case when it is not seen there),
// so "Y JEHOVÁ habló" becomes "Y Jehová habló" and "Y LOS hijos" "Y los
// hijos".
func cleanSpanish(ref, s string, c casing) string {
	verse := ref[strings.LastIndexByte(ref, '.')+1:]
	stanza := strings.HasPrefix(ref, "Ps.119.") && (atoi(verse)-1)%8 == 0
	if verse != "1" && !stanza {
		return s
	}
	words := strings.Fields(s)
	if stanza && len(words) > 0 && hebrewLetters[strings.TrimRight(words[0], ".:")] {
		words = words[1:]
	}
	initial := true
	for i := 0; i < len(words); i++ {
		if !capsWord(letters(words[i])) {
			if letters(words[i]) != "" {
				initial = false
			}
			if strings.ContainsAny(words[i], ".!?") {
				initial = true
			}
			continue
		}
		for j := i; j < len(words); j++ {
			core := letters(words[j])
			if core == "" || strings.ToUpper(core) != core {
				break
			}
			title := initial && j == i
			if st := c[strings.ToLower(core)]; !title && st != nil && st[1] > st[0] {
				title = true
			}
			words[j] = recase(words[j], title)
			if strings.ContainsAny(words[j], ".!?") {
				break
			}
		}
		break
	}
	return strings.Join(words, " ")
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// capsWord reports whether w has at least two letters, all upper case.
func capsWord(w string) bool {
	n := 0
	for _, r := range w {
		if unicode.IsLetter(r) {
			if !unicode.IsUpper(r) {
				return false
			}
			n++
		}
	}
	return n >= 2
}

// recase lowers the letters of w, the first one too unless title.
func recase(w string, title bool) string {
	var b strings.Builder
	first := true
	for _, r := range w {
		if unicode.IsLetter(r) {
			if !first || !title {
				r = unicode.ToLower(r)
			}
			first = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
