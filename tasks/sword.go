package tasks

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"html"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ZText is one testament of a SWORD zText module (the format of the
// sword-text-* Debian packages; SWORD's zverse.cpp): three files that share
// a prefix ("nt" or "ot"):
//
//	.bzs  block index: per block, u32 offset, u32 compressed size, u32 size (little-endian)
//	.bzz  the blocks, each zlib-compressed
//	.bzv  verse index: per entry, u32 block, u32 offset in the uncompressed block, u16 size
//
// The verse index has one entry per slot of the versification: slot 0 is
// empty, slot 1 the module heading; then per book a book heading and per
// chapter a chapter heading followed by its verses.
type ZText struct {
	blocks [][3]uint32
	bzz    []byte
	verses [][3]uint32 // block, offset, size
	cache  map[uint32][]byte
	name   string
}

// ReadZText reads the testament prefix ("nt" or "ot") of the module in dir.
func ReadZText(fsys fs.FS, dir, prefix string) (*ZText, error) {
	read := func(ext string) ([]byte, error) {
		b, err := fs.ReadFile(fsys, path.Join(dir, prefix+ext))
		if err != nil {
			return nil, fmt.Errorf("tasks: sword: %w", err)
		}
		return b, nil
	}
	bzs, err := read(".bzs")
	if err != nil {
		return nil, err
	}
	bzz, err := read(".bzz")
	if err != nil {
		return nil, err
	}
	bzv, err := read(".bzv")
	if err != nil {
		return nil, err
	}
	name := path.Join(dir, prefix)
	if len(bzs)%12 != 0 || len(bzv)%10 != 0 {
		return nil, fmt.Errorf("tasks: sword: %s: .bzs has %d bytes (not a multiple of 12) or .bzv %d (not a multiple of 10)", name, len(bzs), len(bzv))
	}
	z := &ZText{bzz: bzz, cache: map[uint32][]byte{}, name: name}
	le := binary.LittleEndian
	for i := 0; i < len(bzs); i += 12 {
		z.blocks = append(z.blocks, [3]uint32{le.Uint32(bzs[i:]), le.Uint32(bzs[i+4:]), le.Uint32(bzs[i+8:])})
	}
	for i := 0; i < len(bzv); i += 10 {
		z.verses = append(z.verses, [3]uint32{le.Uint32(bzv[i:]), le.Uint32(bzv[i+4:]), uint32(le.Uint16(bzv[i+8:]))})
	}
	return z, nil
}

// Len returns the number of slots in the verse index.
func (z *ZText) Len() int { return len(z.verses) }

// Entry returns the raw (OSIS) text of slot i.
func (z *ZText) Entry(i int) (string, error) {
	v := z.verses[i]
	if v[2] == 0 {
		return "", nil
	}
	blk, err := z.block(v[0])
	if err != nil {
		return "", err
	}
	if int(v[1])+int(v[2]) > len(blk) {
		return "", fmt.Errorf("tasks: sword: %s: slot %d points at bytes %d..%d of block %d, which has %d", z.name, i, v[1], v[1]+v[2], v[0], len(blk))
	}
	return string(blk[v[1] : v[1]+v[2]]), nil
}

func (z *ZText) block(b uint32) ([]byte, error) {
	if d, ok := z.cache[b]; ok {
		return d, nil
	}
	if int(b) >= len(z.blocks) {
		return nil, fmt.Errorf("tasks: sword: %s: block %d of %d", z.name, b, len(z.blocks))
	}
	e := z.blocks[b]
	if uint64(e[0])+uint64(e[1]) > uint64(len(z.bzz)) {
		return nil, fmt.Errorf("tasks: sword: %s: block %d lies at %d+%d past the end of .bzz (%d bytes)", z.name, b, e[0], e[1], len(z.bzz))
	}
	r, err := zlib.NewReader(bytes.NewReader(z.bzz[e[0] : e[0]+e[1]]))
	if err != nil {
		return nil, fmt.Errorf("tasks: sword: %s: block %d: %w", z.name, b, err)
	}
	d, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("tasks: sword: %s: block %d: %w", z.name, b, err)
	}
	if len(d) != int(e[2]) {
		return nil, fmt.Errorf("tasks: sword: %s: block %d inflates to %d bytes, the index says %d", z.name, b, len(d), e[2])
	}
	z.cache[b] = d
	return d, nil
}

var (
	reBook    = regexp.MustCompile(`<div\b[^>]*\bsID="[^"]*"[^>]*>`)
	reOsisID  = regexp.MustCompile(`\bosisID="([^"]*)"`)
	reType    = regexp.MustCompile(`\btype="book"`)
	reChapter = regexp.MustCompile(`<chapter\b[^>]*\bsID="[^"]*"[^>]*>`)
	// reChapterEnd matches the end markers of a chapter or a book.
	reChapterEnd = regexp.MustCompile(`<chapter\b[^>]*\beID="|<div\b[^>]*\beID="[^"]*"[^>]*\btype="book"`)
)

// Verses walks the slots in order and returns the verses by OSIS reference
// ("Matt.1.1") in canonical order. Book and chapter headings are found by
// their OSIS start markers (<div type="book" sID osisID> and <chapter sID
// osisID>), so no versification table is needed; a verse is each slot after
// a chapter heading, numbered from 1. Verse text is cleaned with OSISText.
func (z *ZText) Verses() (refs []string, text map[string]string, err error) {
	return z.versesText(false)
}

// versesText is Verses; asPrinted is osisText's.
func (z *ZText) versesText(asPrinted bool) (refs []string, text map[string]string, err error) {
	text = map[string]string{}
	chapter := ""
	n := 0
	for i := 2; i < z.Len(); i++ {
		e, err := z.Entry(i)
		if err != nil {
			return nil, nil, err
		}
		if m := reChapter.FindString(e); m != "" && strings.TrimSpace(OSISText(e)) == "" {
			if id := reOsisID.FindStringSubmatch(m); id != nil {
				chapter, n = id[1], 0
				continue
			}
		}
		// A book heading: its title sits in <title>, which OSISText drops.
		if m := reBook.FindString(e); m != "" && reType.MatchString(m) && strings.TrimSpace(OSISText(e)) == "" {
			chapter = "" // a book heading: verses start after the next chapter heading
			continue
		}
		if chapter == "" {
			continue
		}
		// Anything after the chapter's end marker (a glossary after the last
		// book, say) is not verse text.
		if k := reChapterEnd.FindStringIndex(e); k != nil {
			e = e[:k[0]]
		}
		n++
		ref := fmt.Sprintf("%s.%d", chapter, n)
		refs = append(refs, ref)
		text[ref] = osisText(e, asPrinted)
	}
	return refs, text, nil
}

// dropped are OSIS elements whose content is not verse text: notes
// (footnotes, cross references) and titles (section headings).
var dropped = map[string]bool{"note": true, "title": true}

// inline are OSIS elements that mark up words inside running text: their
// tags vanish without a space (<w>Christ</w>, stays "Christ,"). Other tags
// (divisions, milestones, line breaks) separate words.
var inline = map[string]bool{"w": true, "transChange": true, "seg": true, "hi": true, "divineName": true, "foreign": true,
	"q": true, "name": true, "catchWord": true, "rdg": true, "reference": true, "abbr": true, "add": true, "inscription": true}

// OSISText returns the plain text of an OSIS fragment: tags removed (inline ones
// without a space, the others as one), the content of <note> and <title> elements dropped, entities decoded, white
// space collapsed.
func OSISText(s string) string { return osisText(s, false) }

// reCanonical marks a title that is part of the text (a psalm's superscription).
var reCanonical = regexp.MustCompile(`\bcanonical="true"`)

// osisText is OSISText; asPrinted keeps the words of titles marked
// canonical="true" (the psalms' superscriptions, which other translations
// number as part of verse 1) and separates the words of <transChange>
// elements from letters they touch.
func osisText(s string, asPrinted bool) string {
	var b strings.Builder
	skip := 0      // depth inside dropped elements
	kept := 0      // depth inside canonical titles that are kept
	gap := false   // a dropped element just ended: separate the next word
	apart := false // a <transChange> tag was passed: separate touching words
	for i := 0; i < len(s); {
		if s[i] != '<' {
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				j = len(s) - i
			}
			if skip == 0 {
				r, _ := utf8.DecodeRuneInString(s[i:])
				if gap && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
					b.WriteByte(' ')
				}
				if last, _ := utf8.DecodeLastRuneInString(b.String()); apart && wordRune(last) && wordRune(r) {
					b.WriteByte(' ')
				}
				gap, apart = false, false
				b.WriteString(s[i : i+j])
			}
			i += j
			continue
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			break // a torn tag: drop the rest
		}
		tag := s[i+1 : i+j]
		i += j + 1
		closing := strings.HasPrefix(tag, "/")
		selfClosing := strings.HasSuffix(tag, "/")
		name := strings.TrimPrefix(tag, "/")
		if k := strings.IndexAny(name, " \t\n/"); k >= 0 {
			name = name[:k]
		}
		if !dropped[name] || selfClosing {
			if skip == 0 && !inline[name] {
				b.WriteByte(' ')
			}
			// Words added by the translators (<transChange>) are words of
			// their own, though some modules glue the tag to its neighbours.
			if asPrinted && name == "transChange" {
				apart = true
			}
			continue
		}
		if asPrinted && skip == 0 && name == "title" {
			if !closing && reCanonical.MatchString(tag) {
				kept++
				b.WriteByte(' ')
				continue
			}
			if closing && kept > 0 {
				kept--
				b.WriteByte(' ')
				continue
			}
		}
		if closing {
			if skip > 0 {
				skip--
				gap = skip == 0
			}
		} else {
			skip++
		}
	}
	return strings.Join(strings.Fields(html.UnescapeString(b.String())), " ")
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
