package server

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
)

// getDoc fetches path (with key as bearer token when set) and decodes the
// OpenAPI document it answers.
func getDoc(t *testing.T, s *Server, path, key string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 200 {
		return rec.Code, nil
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return rec.Code, doc
}

// tagNames are the json names of t's fields, read from the tags here (not
// with openapi.go's code), and those that omitempty leaves out.
func tagNames(t reflect.Type) (all, optional []string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if strings.Contains(opts, "omitempty") || f.Type.Kind() == reflect.Pointer {
			optional = append(optional, name)
		}
	}
	sort.Strings(all)
	sort.Strings(optional)
	return all, optional
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// resolve follows a $ref into the document's components.
func resolve(t *testing.T, doc, s map[string]any) map[string]any {
	t.Helper()
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	comp, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
	if !ok || comp == nil {
		t.Fatalf("$ref %q does not resolve", ref)
	}
	return comp
}

func TestOpenAPIDocs(t *testing.T) {
	m, tok := classifierModel(t, []string{"score"})
	rr, err := New(m, tok, Options{Name: "cross"})
	if err != nil {
		t.Fatal(err)
	}
	lm, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	for _, s := range []*Server{rr, lm} {
		code, doc := getDoc(t, s, "/docs", "")
		_, again := getDoc(t, s, "/api-doc/openapi.json", "")
		if code != 200 || !reflect.DeepEqual(doc, again) {
			t.Fatalf("GET /docs: %d; /api-doc/openapi.json the same: %v", code, reflect.DeepEqual(doc, again))
		}
		if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.0.") {
			t.Errorf("openapi %q", v)
		}
		// The document's operations are exactly the routes that answer.
		var ops []string
		for p, item := range doc["paths"].(map[string]any) {
			for method, op := range item.(map[string]any) {
				ops = append(ops, strings.ToUpper(method)+" "+p)
				if op.(map[string]any)["summary"] == "" {
					t.Errorf("%s %s: no summary", method, p)
				}
			}
		}
		want := slices.Clone(s.Info().Endpoints)
		sort.Strings(ops)
		sort.Strings(want)
		if !slices.Equal(ops, want) {
			t.Errorf("document's operations\n%v\nthe routes that answer\n%v", ops, want)
		}
		// Each listed route is served: not the mux's 404 or 405.
		for _, op := range ops {
			method, path, _ := strings.Cut(op, " ")
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, jsonRequest(method, path, strings.NewReader("{}")))
			if strings.Contains(rec.Body.String(), "no endpoint") || rec.Code == 405 {
				t.Errorf("%s: %d %s", op, rec.Code, rec.Body.String())
			}
		}
		// Each request schema's properties are its type's json fields;
		// omitempty and pointers are not required.
		for _, e := range s.served() {
			if e.req == nil || e.req.Kind() != reflect.Struct || e.req.Name() == "" || strings.HasPrefix(e.req.Name(), "oneOf") {
				continue
			}
			op := doc["paths"].(map[string]any)[e.path].(map[string]any)[strings.ToLower(e.method)].(map[string]any)
			sch := resolve(t, doc, op["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any))
			all, optional := tagNames(e.req)
			props, _ := sch["properties"].(map[string]any)
			if got := keys(props); !slices.Equal(got, all) {
				t.Errorf("%s %s: properties %v, want %v", e.method, e.path, got, all)
			}
			for _, r := range sch["required"].([]any) {
				if slices.Contains(optional, r.(string)) {
					t.Errorf("%s %s: %q required, but omitempty or a pointer", e.method, e.path, r)
				}
			}
			if n := len(sch["required"].([]any)); n != len(all)-len(optional) {
				t.Errorf("%s %s: %d required of %v, %v optional", e.method, e.path, n, all, optional)
			}
		}
	}
	// A route that does not answer for the model is not documented.
	_, doc := getDoc(t, lm, "/docs", "")
	if _, ok := doc["paths"].(map[string]any)["/v1/rerank"]; ok {
		t.Error("a masked-LM model's document lists /v1/rerank")
	}
	_, doc = getDoc(t, rr, "/docs", "")
	rq := resolve(t, doc, doc["paths"].(map[string]any)["/v1/rerank"].(map[string]any)["post"].(map[string]any)["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any))
	if got := keys(rq["properties"].(map[string]any)); !slices.Equal(got, []string{"documents", "model", "query", "return_documents", "top_n"}) {
		t.Errorf("/v1/rerank's request properties %v", got)
	}
	if docs := rq["properties"].(map[string]any)["documents"].(map[string]any); docs["type"] != "array" || docs["items"].(map[string]any)["oneOf"] == nil {
		t.Errorf("documents: %v", docs)
	}
	if req := rq["required"].([]any); len(req) != 2 || req[0] != "query" || req[1] != "documents" {
		t.Errorf("/v1/rerank's required %v", req)
	}
}

// With an API key, GET /docs needs it as the other routes do.
func TestOpenAPIDocsKey(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{APIKey: "k"})
	for _, p := range []string{"/docs", "/api-doc/openapi.json"} {
		if code, _ := getDoc(t, s, p, ""); code != 401 {
			t.Errorf("GET %s without the key: %d, want 401", p, code)
		}
		code, doc := getDoc(t, s, p, "k")
		if code != 200 || doc["security"] == nil {
			t.Errorf("GET %s with the key: %d, security %v", p, code, doc["security"])
		}
	}
}

func TestSchemaReflection(t *testing.T) {
	type inner struct {
		A int `json:"a"`
	}
	type Embedded struct {
		E string `json:"e"`
	}
	type sample struct {
		Embedded
		S    string            `json:"s"`
		O    int               `json:"o,omitempty"`
		P    *float64          `json:"p"`
		L    []bool            `json:"l"`
		M    map[string]int    `json:"m"`
		Arr  [2]int            `json:"arr"`
		R    json.RawMessage   `json:"r"`
		In   inner             `json:"in"`
		Ptr  *inner            `json:"ptr,omitempty"`
		Skip int               `json:"-"`
		priv int               //nolint:unused
		Any  any               `json:"any"`
		Ins  Inputs            `json:"ins"`
		Alt  oneOf[int, []int] `json:"alt"`
	}
	g := &schemaGen{components: map[string]any{}, names: map[reflect.Type]string{}}
	b, err := json.Marshal(g.schema(reflect.TypeFor[sample]()))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := json.Marshal(g.components)
	got := string(b) + " " + string(c)
	for _, w := range []string{
		`{"$ref":"#/components/schemas/sample"}`,
		`"e":{"type":"string"}`, `"o":{"type":"integer"}`, `"p":{"nullable":true,"type":"number"}`,
		`"l":{"items":{"type":"boolean"},"type":"array"}`, `"m":{"additionalProperties":{"type":"integer"},"type":"object"}`,
		`"arr":{"items":{"type":"integer"},"maxItems":2,"minItems":2,"type":"array"}`, `"r":{}`, `"any":{}`,
		`"in":{"$ref":"#/components/schemas/inner"}`, `"ptr":{"allOf":[{"$ref":"#/components/schemas/inner"}],"nullable":true}`,
		`"alt":{"oneOf":[{"type":"integer"},{"items":{"type":"integer"},"type":"array"}]}`,
		`"required":["e","s","l","m","arr","r","in","any","ins","alt"]`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("schema lacks %s:\n%s", w, got)
		}
	}
	if strings.Contains(got, `"Skip"`) || strings.Contains(got, `"priv"`) || strings.Contains(got, `"Embedded"`) {
		t.Errorf("schema has a skipped field: %s", got)
	}
}
