package tasks

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"path"
	"strings"
	"testing"
	"testing/fstest"
)

// putZText writes slots as a zText testament (prefix.bzs/.bzz/.bzv) into
// fsys, perBlock slots per compressed block.
func putZText(t testing.TB, fsys fstest.MapFS, dir, prefix string, slots []string, perBlock int) {
	t.Helper()
	var bzs, bzz, bzv bytes.Buffer
	le := binary.LittleEndian
	for b := 0; b*perBlock < len(slots); b++ {
		var raw bytes.Buffer
		for i := b * perBlock; i < min((b+1)*perBlock, len(slots)); i++ {
			var e [10]byte
			le.PutUint32(e[0:], uint32(b))
			le.PutUint32(e[4:], uint32(raw.Len()))
			le.PutUint16(e[8:], uint16(len(slots[i])))
			bzv.Write(e[:])
			raw.WriteString(slots[i])
		}
		var z bytes.Buffer
		w := zlib.NewWriter(&z)
		w.Write(raw.Bytes())
		w.Close()
		var e [12]byte
		le.PutUint32(e[0:], uint32(bzz.Len()))
		le.PutUint32(e[4:], uint32(z.Len()))
		le.PutUint32(e[8:], uint32(raw.Len()))
		bzs.Write(e[:])
		bzz.Write(z.Bytes())
	}
	fsys[path.Join(dir, prefix+".bzs")] = &fstest.MapFile{Data: bzs.Bytes()}
	fsys[path.Join(dir, prefix+".bzz")] = &fstest.MapFile{Data: bzz.Bytes()}
	fsys[path.Join(dir, prefix+".bzv")] = &fstest.MapFile{Data: bzv.Bytes()}
}

// testament lays out books of chapters of verses the way osis2mod does:
// empty slot, module heading, then per book a heading and per chapter a
// heading followed by the verses; the last verse of a chapter carries the
// end markers (and, at the very end, trailing matter that is not verse text).
func testament(books []string, chapters [][][]string, trailer string) []string {
	slots := []string{"", `<milestone type="x-importer" subType="x-osis2mod" n="test"/>`}
	for b, book := range books {
		slots = append(slots, `<div canonical="true" osisID="`+book+`" sID="gen`+book+`" type="book"/> <title type="main">THE BOOK OF `+strings.ToUpper(book)+`</title>`)
		for c, verses := range chapters[b] {
			ch := book + "." + string(rune('1'+c))
			slots = append(slots, `<chapter n="`+string(rune('1'+c))+`" osisID="`+ch+`" sID="`+ch+`"/> `)
			for v, text := range verses {
				if v == len(verses)-1 {
					text += ` <chapter eID="` + ch + `"/>`
					if c == len(chapters[b])-1 {
						text += ` <div eID="gen` + book + `" osisID="` + book + `" type="book"/>`
						if b == len(books)-1 {
							text += trailer
						}
					}
				}
				slots = append(slots, text)
			}
		}
	}
	return slots
}

func TestZTextVerses(t *testing.T) {
	fsys := fstest.MapFS{}
	slots := testament([]string{"Matt", "Jude"}, [][][]string{
		{{`<w lemma="strong:G0976">The</w> <w>book</w> of the <transChange type="added">generation</transChange>.`, `Second &amp; last<note placement="foot">a <w>note</w></note>word.`}, {`Chapter two.`}},
		{{`<title type="x-section">A heading</title>Jude, a servant.`, ``, `Amen.`}},
	}, ` <div type="glossary">Not a verse.</div>`)
	putZText(t, fsys, "mod", "nt", slots, 3)
	z, err := ReadZText(fsys, "mod", "nt")
	if err != nil {
		t.Fatal(err)
	}
	refs, text, err := z.Verses()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ ref, text string }{
		{"Matt.1.1", "The book of the generation."},
		{"Matt.1.2", "Second & last word."},
		{"Matt.2.1", "Chapter two."},
		{"Jude.1.1", "Jude, a servant."},
		{"Jude.1.2", ""},
		{"Jude.1.3", "Amen."},
	}
	if len(refs) != len(want) {
		t.Fatalf("refs %v, want %d", refs, len(want))
	}
	for i, w := range want {
		if refs[i] != w.ref || text[w.ref] != w.text {
			t.Errorf("verse %d: %s %q, want %s %q", i, refs[i], text[refs[i]], w.ref, w.text)
		}
	}
}

func TestZTextCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(fstest.MapFS)
		want string
	}{
		{"odd_index", func(f fstest.MapFS) { f["m/nt.bzv"].Data = f["m/nt.bzv"].Data[:7] }, "not a multiple of 10"},
		{"bad_zlib", func(f fstest.MapFS) { f["m/nt.bzz"].Data = bytes.Repeat([]byte{1}, len(f["m/nt.bzz"].Data)) }, "block 0"},
		{"missing", func(f fstest.MapFS) { delete(f, "m/nt.bzs") }, "nt.bzs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			putZText(t, fsys, "m", "nt", testament([]string{"Matt"}, [][][]string{{{"a", "b"}}}, ""), 10)
			tc.edit(fsys)
			z, err := ReadZText(fsys, "m", "nt")
			if err == nil {
				_, _, err = z.Verses()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestOSISText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`<w lemma="x">Christ</w>, the <w>son</w>`, "Christ, the son"},
		{`Christ,<note placement="foot"><reference>1:1</reference> Messiah</note><w>the</w> son`, "Christ, the son"},
		{`end.<note n="a">x</note>”`, "end.”"},
		{`<title type="psalm">Of David.</title>Praise <divineName>Yahweh</divineName>!`, "Praise Yahweh!"},
		{`one<milestone type="x-p"/>two<lb/>three`, "one two three"},
		{`a &lt;b&gt; &amp; &#8220;c&#8221;`, "a <b> & “c”"},
		{`nested <note>a <note>b</note> c</note>tail`, "nested tail"},
		{`torn <w`, "torn"},
	} {
		if got := OSISText(tc.in); got != tc.want {
			t.Errorf("OSISText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
