package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// Regression tests for input a careless or hostile operator may give: each
// must be an error that names the field and the value, never a panic, a
// hang, a silently changed value or a plan built from a misread document.

// rejects checks that doc is rejected with exactly want.
func rejects(t *testing.T, doc []byte, want string) {
	t.Helper()
	s, err := Unmarshal(doc)
	if err == nil {
		t.Fatalf("no error; want %s", want)
	}
	if s != nil {
		t.Errorf("a snapshot came back with the error")
	}
	if err.Error() != want {
		t.Errorf("err =\n%s\nwant\n%s", err, want)
	}
}

// minimal is the smallest valid snapshot, with %s where a key may be added
// to the quota node.
const minimal = `{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1%s}}`

func TestUnmarshalRejectsStringsThatAreNotUTF8(t *testing.T) {
	// encoding/json would turn both IDs into "\ufffd", so that two
	// different GPUs would be "listed twice", or one ID would quietly
	// become another.
	doc := []byte(fmt.Sprintf(minimal, ", \"namespaces\": [\"ok\", \"a\xffb\"]"))
	rejects(t, doc, `quota.namespaces[1]: the string is not valid UTF-8 (byte 0xff at line 1, column 91); a snapshot is UTF-8 text`)
	doc = []byte(fmt.Sprintf(minimal, ", \"namespaces\": [\"a\\u00e9\xc3\"]"))
	rejects(t, doc, `quota.namespaces[0]: the string is not valid UTF-8 (byte 0xc3 at line 1, column 91); a snapshot is UTF-8 text`)
}

func TestUnmarshalRejectsLoneSurrogates(t *testing.T) {
	for _, tt := range []struct{ esc, want string }{
		{`\ud800`, `\ud800`},
		{`\udc00\ud800`, `\udc00`},
		{`x\ud83dy`, `\ud83d`},
		{`\ud83d\u0041`, `\ud83d`},
	} {
		doc := []byte(fmt.Sprintf(minimal, `, "namespaces": ["`+tt.esc+`"]`))
		rejects(t, doc, `quota.namespaces[0]: the string holds a lone UTF-16 surrogate `+tt.want+
			` at line 1, column `+fmt.Sprint(84+strings.Index(tt.esc, tt.want))+` (not a character)`)
	}
	// A proper pair and other escapes decode (the namespace is then
	// refused as not Nomad's, quoting the decoded name).
	_, err := Unmarshal([]byte(fmt.Sprintf(minimal, `, "namespaces": ["\ud83d\ude00 \u00e9\t\"\\\/"]`)))
	if want := strconv.Quote("\U0001F600 \u00e9\t\"\\/"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want the decoded namespace %s in it", err, want)
	}
}

func TestUnmarshalExplainsByteOrderMarks(t *testing.T) {
	doc := []byte(fmt.Sprintf(minimal, ""))
	rejects(t, append([]byte{0xEF, 0xBB, 0xBF}, doc...),
		`the input starts with a UTF-8 byte order mark; a snapshot is plain UTF-8 JSON without one`)
	rejects(t, []byte{0xFF, 0xFE, '{', 0},
		`the input is UTF-16 text (it starts with a UTF-16 byte order mark); a snapshot is UTF-8 JSON`)
}

func TestUnmarshalQuotesHostileKeysInPaths(t *testing.T) {
	// The key is printed quoted in the path and the message: raw, it could
	// carry terminal escapes or megabytes into the error.
	rejects(t, []byte(`{"\u001b[2J": 1}`), `["\x1b[2J"]: unknown key "\x1b[2J"`)
	long := strings.Repeat("k", 100000)
	rejects(t, []byte(`{"time": "2026-12-01T08:00:00Z", "`+long+`": 1}`),
		`["`+long[:64]+`"...]: unknown key "`+long[:64]+`"...`)
	rejects(t, []byte(`{"nodes": [{"id": "n", "gpu s": []}]}`), `nodes[0]["gpu s"]: unknown key "gpu s" (did you mean "gpus"?)`)
}

func TestUnmarshalShortensHugeNumbers(t *testing.T) {
	digits := "1" + strings.Repeat("0", 5000)
	rejects(t, []byte(fmt.Sprintf(`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": %s}}`, digits)),
		`quota.gpus: `+digits[:40]+`... (5001 digits) is out of range`)
	rejects(t, []byte(`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1e999999999}}`),
		`quota.gpus: 1e999999999 is not a whole number`)
	rejects(t, []byte(`{"time": `+digits+`}`), `time: want a string, not the number `+digits[:40]+`... (5001 digits)`)
}

func TestUnmarshalReportsSyntaxErrorsWhereTheyAre(t *testing.T) {
	// encoding/json's Decoder.Token gives offsets relative to the last
	// scalar for errors inside values; the columns here are the bytes'.
	for _, tt := range []struct{ doc, want string }{
		{`x`, `JSON syntax error at line 1, column 1: invalid character 'x' looking for beginning of value`},
		{`é`, `JSON syntax error at line 1, column 1: invalid character 'é' looking for beginning of value`},
		{"{\n  \"time\": tru}", `JSON syntax error at line 2, column 14: invalid character '}' in literal true (expecting 'e')`},
		{"{\n  \"time\": 01}", `JSON syntax error at line 2, column 12: invalid character '1' after object key:value pair`},
		{`{"time": truex}`, `JSON syntax error at line 1, column 14: invalid character 'x' after object key:value pair`},
		{`{"time": -}`, `JSON syntax error at line 1, column 11: invalid character '}' in numeric literal`},
		{`{"time": 1.}`, `JSON syntax error at line 1, column 12: invalid character '}' after decimal point in numeric literal`},
		{`{"time": 1e+}`, `JSON syntax error at line 1, column 13: invalid character '}' in exponent of numeric literal`},
		{`{"time": "a\q"}`, `JSON syntax error at line 1, column 13: invalid character 'q' in string escape code`},
		{`{"time": "a\u00g0"}`, `JSON syntax error at line 1, column 16: invalid character 'g' in \u hexadecimal character escape`},
		{"{\"time\": \"a\tb\"}", `JSON syntax error at line 1, column 12: invalid character '\t' in string literal`},
		{`{"time": "x",}`, `JSON syntax error at line 1, column 14: invalid character '}' looking for beginning of object key string`},
		{`{"quota": {"namespaces": ["a" "b"]}}`, `JSON syntax error at line 1, column 31: invalid character '"' after array element`},
		{`{"quota": {"namespaces": ["a", 5 6]}}`, `JSON syntax error at line 1, column 34: invalid character '6' after array element`},
		{`{"time": NaN}`, `JSON syntax error at line 1, column 10: invalid character 'N' looking for beginning of value`},
		{`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1 /* c */}}`,
			`JSON syntax error at line 1, column 67: invalid character '/' after object key:value pair`},
		{`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1}`, `unexpected end of the JSON input`},
		{`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q`, `quota.name: unexpected end of the JSON input`},
		{`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "namespaces": ["a", `, `quota.namespaces[1]: unexpected end of the JSON input`},
	} {
		rejects(t, []byte(tt.doc), tt.want)
	}
}

func TestUnmarshalRejectsAJobThatAsksForMoreThanMaxGPUs(t *testing.T) {
	// count x gpus, added up over a job's groups, must not overflow: the
	// planner decides entitlement on the sum, and an overflow to a negative
	// number made a job entitled beyond its quota.
	group := func(name string, count, gpus int64) string {
		return fmt.Sprintf(`{"namespace": "ns", "job": "j", "group": %q, "type": "batch", "priority": 50,
		  "count": %d, "gpus": %d, "submitted_at": "2026-12-01T07:00:00Z"}`, name, count, gpus)
	}
	doc := func(groups ...string) []byte {
		return []byte(`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1, "namespaces": ["ns"]},
		  "pending": [` + strings.Join(groups, ",") + `]}`)
	}
	rejects(t, doc(group("a", quota.MaxGPUs, quota.MaxGPUs)),
		`pending[0]: count 2147483647 x gpus 2147483647 asks for 4611686014132420609 GPUs, more than 2147483647`)
	rejects(t, doc(group("a", 1<<30, 1), group("b", 1<<30, 1)),
		`pending[1]: the groups of job "ns/j" ask for 2147483648 GPUs in all, more than 2147483647`)
	if _, err := Unmarshal(doc(group("a", 1<<30, 1), group("b", 1<<30-1, 1))); err != nil {
		t.Errorf("a job of MaxGPUs GPUs in all is rejected: %v", err)
	}
}

func TestUnmarshalOfTheOverflowingJobNeverAdmitsBeyondTheQuota(t *testing.T) {
	// The reproduction of the overflow: three groups of 2^31-1 x 2^31-1
	// GPUs and one of 16 x 1 in a quota of 1 GPU with 16 free GPUs. Before
	// the check, the job's total wrapped to a negative number, the job was
	// entitled and its small group took all 16 GPUs.
	var groups []string
	for i := 0; i < 3; i++ {
		groups = append(groups, fmt.Sprintf(`{"namespace": "a", "job": "p", "group": "g%d", "type": "batch", "priority": 50,
		  "count": 2147483647, "gpus": 2147483647, "submitted_at": "2026-12-01T07:00:00Z"}`, i))
	}
	groups = append(groups, `{"namespace": "a", "job": "p", "group": "small", "type": "batch", "priority": 50,
	  "count": 16, "gpus": 1, "submitted_at": "2026-12-01T07:00:00Z"}`)
	var gpus []string
	for i := 0; i < 16; i++ {
		gpus = append(gpus, fmt.Sprintf(`{"id": "g%d"}`, i))
	}
	doc := `{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1, "namespaces": ["a"]},
	  "nodes": [{"id": "n1", "gpus": [` + strings.Join(gpus, ",") + `]}],
	  "pending": [` + strings.Join(groups, ",") + `]}`
	if _, err := Unmarshal([]byte(doc)); err == nil || !strings.Contains(err.Error(), "more than 2147483647") {
		t.Fatalf("err = %v, want the job rejected for asking too many GPUs", err)
	}
}

func TestUnmarshalBoundsTheDepthOfTheQuotaTree(t *testing.T) {
	tree := func(levels int) string {
		var b strings.Builder
		for i := 0; i < levels; i++ {
			if i > 0 {
				b.WriteString(`, "children": [`)
			}
			fmt.Fprintf(&b, `{"name": "q%d", "gpus": 1, "namespaces": ["ns-%d"], "changed_at": "2026-12-01T07:00:00Z"`, i, i)
		}
		for i := 0; i < levels; i++ {
			if i > 0 {
				b.WriteString(`]`)
			}
			b.WriteString(`}`)
		}
		return `{"time": "2026-12-01T08:00:00Z", "quota": ` + b.String() + `}`
	}
	s, err := Unmarshal([]byte(tree(quota.MaxDepth)))
	if err != nil {
		t.Fatalf("a tree of MaxDepth levels, namespaces on each, is rejected: %v", err)
	}
	// It survives encoding.
	out, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Unmarshal(out); err != nil {
		t.Fatalf("Encode's output of a MaxDepth tree does not decode: %v", err)
	}
	rejects(t, []byte(tree(quota.MaxDepth+1)),
		`quota`+strings.Repeat(`.children[0]`, quota.MaxDepth)+`: the quota tree is more than 32 levels deep`)
}

func TestATreeFromTheHCLLoaderAlwaysFitsInASnapshot(t *testing.T) {
	var src strings.Builder
	for i := 0; i < quota.MaxDepth; i++ {
		fmt.Fprintf(&src, "quota \"q%d\" {\n  gpus = 1\n  namespaces = [\"ns-%d\"]\n", i, i)
	}
	src.WriteString(strings.Repeat("}\n", quota.MaxDepth))
	root, settings, err := quota.Parse([]byte(src.String()), "deep.hcl")
	if err != nil {
		t.Fatal(err)
	}
	s := &plan.Snapshot{Time: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), Quota: root, Settings: settings}
	out, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Unmarshal(out); err != nil {
		t.Fatalf("the deepest tree the HCL loader accepts does not decode from a snapshot: %v", err)
	}
}

func TestUnmarshalRejectsAnAllocationWithAnEmptyNode(t *testing.T) {
	doc := `{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1},
	  "allocations": [{"id": "a", "namespace": "ns", "job": "j", "group": "g", "type": "batch",
	    "priority": 50, "node": "", "gpu_ids": [], "started_at": "2026-12-01T07:00:00Z"}]}`
	rejects(t, []byte(doc), `allocations[0].node: must not be empty`)
}

func TestUnmarshalShortensLongValuesInMessages(t *testing.T) {
	long := strings.Repeat("n", 1<<20)
	doc := `{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1},
	  "allocations": [{"id": "a", "namespace": "ns", "job": "j", "group": "g", "type": "batch",
	    "priority": 50, "node": "` + long + `", "gpu_ids": [], "started_at": "2026-12-01T07:00:00Z"}]}`
	rejects(t, []byte(doc), `allocations[0].node: unknown node "`+long[:64]+`"...`)
}

// endless is a reader that never ends, like /dev/zero.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

func TestDecodeOfEndlessBinaryInputFailsAtOnce(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := Decode(endless(0))
		done <- err
	}()
	select {
	case err := <-done:
		want := `JSON syntax error at line 1, column 1: invalid character '\x00' looking for beginning of value`
		if err == nil || err.Error() != want {
			t.Errorf("err = %v, want %s", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Decode of an endless stream of zero bytes did not return")
	}
}

func TestDecodeRejectsInputLargerThanMaxSize(t *testing.T) {
	defer func(old int) { maxSize = old }(maxSize)
	maxSize = 1 << 20
	in := io.MultiReader(strings.NewReader(`{"time": "`), endless('a'))
	_, err := Decode(in)
	if want := "the input is larger than 1 MiB, the most a snapshot may be"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	// Input up to the limit is read whole.
	doc := []byte(fmt.Sprintf(minimal, ""))
	doc = append(doc, bytes.Repeat([]byte(" "), maxSize-len(doc))...)
	if _, err := Decode(bytes.NewReader(doc)); err != nil {
		t.Errorf("a document of exactly the limit is rejected: %v", err)
	}
}

func TestDecodeRefusesALargeFileBeforeReadingIt(t *testing.T) {
	defer func(old int) { maxSize = old }(maxSize)
	maxSize = 1 << 20
	path := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"time": "`); err != nil {
		t.Fatal(err)
	}
	// A sparse file of 1 GiB: reading it whole would take seconds.
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = Decode(f)
	if want := "the input is larger than 1 MiB, the most a snapshot may be"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	// Nothing past the first bytes was read.
	if off, _ := f.Seek(0, io.SeekCurrent); off > 4096 {
		t.Errorf("Decode read %d bytes of a file it refuses by its size", off)
	}
}

func TestDecodeReportsTheSameErrorsAsUnmarshal(t *testing.T) {
	// Decode looks at the first bytes before reading the rest; what it
	// reports must not differ from Unmarshal's report on the whole input.
	for _, doc := range []string{"", "  \n", "[]", "[1, 2]", "123", "-", `"text"`, "true", "null", "x", "\x00",
		"\xef\xbb\xbf{}", "{", `{"time": 5}`, " {}", "\n\n]"} {
		_, err1 := Unmarshal([]byte(doc))
		_, err2 := Decode(strings.NewReader(doc))
		if fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Errorf("%q: Unmarshal says %v, Decode says %v", doc, err1, err2)
		}
	}
}

// BenchmarkUnmarshal decodes a snapshot of 1,000 nodes of 8 GPUs, each
// held by one allocation.
func BenchmarkUnmarshal(b *testing.B) {
	var nodes, allocs []string
	for n := 0; n < 1000; n++ {
		var gpus, ids []string
		for g := 0; g < 8; g++ {
			gpus = append(gpus, fmt.Sprintf(`{"id": "GPU-%04d-%d", "model": "NVIDIA H100 80GB HBM3", "healthy": true}`, n, g))
			ids = append(ids, fmt.Sprintf(`"GPU-%04d-%d"`, n, g))
		}
		nodes = append(nodes, fmt.Sprintf(`{"id": "node-%04d", "datacenter": "dc1", "node_pool": "default", "gpus": [%s]}`,
			n, strings.Join(gpus, ", ")))
		allocs = append(allocs, fmt.Sprintf(`{"id": "alloc-%04d", "namespace": "ns", "job": "j%d", "group": "g",
		  "type": "batch", "priority": 50, "node": "node-%04d", "gpu_ids": [%s], "idle": false, "elastic": false,
		  "reservation": "", "stopping_for": "", "started_at": "2026-12-01T07:00:00Z"}`, n, n/4, n, strings.Join(ids, ", ")))
	}
	doc := []byte(`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 8000, "namespaces": ["ns"]},
	  "nodes": [` + strings.Join(nodes, ",\n") + `], "allocations": [` + strings.Join(allocs, ",\n") + `]}`)
	b.SetBytes(int64(len(doc)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Unmarshal(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func TestUnmarshalRejectsAllocationsOfOneJobThatDisagreeOnJobMeta(t *testing.T) {
	alloc := func(id, gpu string, idle, elastic bool) string {
		return fmt.Sprintf(`{"id": %q, "namespace": "b", "job": "train", "group": %q, "type": "batch", "priority": 50,
		  "node": "n1", "gpu_ids": [%q], "idle": %v, "elastic": %v, "started_at": "2026-12-01T07:00:00Z"}`, id, id, gpu, idle, elastic)
	}
	doc := func(allocs ...string) []byte {
		return []byte(`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 2, "namespaces": ["b"]},
		  "nodes": [{"id": "n1", "gpus": [{"id": "g0"}, {"id": "g1"}, {"id": "g2"}]}],
		  "allocations": [` + strings.Join(allocs, ",") + `]}`)
	}
	// The planner crashed on a batch job with an idle and a non-idle (debt)
	// allocation; idle and elastic are job meta.
	rejects(t, doc(alloc("x1", "g0", false, false), alloc("x2", "g1", true, false)),
		`allocations[1].idle: true differs from false in allocations[0], an allocation of the same job "b/train"`)
	rejects(t, doc(alloc("x1", "g0", false, true), alloc("x2", "g1", false, true), alloc("x3", "g2", false, false)),
		`allocations[2].elastic: false differs from true in allocations[0], an allocation of the same job "b/train"`)
	if _, err := Unmarshal(doc(alloc("x1", "g0", true, true), alloc("x2", "g1", true, true))); err != nil {
		t.Errorf("allocations of one job that agree are rejected: %v", err)
	}
}
