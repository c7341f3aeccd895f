package quota

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLoadFileReadsTheReferenceTree(t *testing.T) {
	root, settings, err := LoadFile(filepath.Join("..", "..", "examples", "reference", "quota.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "examples", "reference", "quota.hcl")
	want := &Node{
		Name: "Quota1", GPUs: Plain(128), ChildPreemption: true, Namespaces: []string{"workspace-a"},
		Pos: path + ":27",
		Children: []*Node{
			{Name: "Quota1.1", GPUs: Plain(48), Namespaces: []string{"workspace-b"}, Pos: path + ":32"},
			{Name: "Quota1.2", GPUs: Plain(80), Namespaces: []string{"workspace-c"}, Pos: path + ":37"},
		},
	}
	if !reflect.DeepEqual(root, want) {
		t.Errorf("tree:\n got %+v\nwant %+v", dump(root), dump(want))
	}
	if settings != defaultsWith(func(s *Settings) { s.MinRuntime, s.AutoscalerEvaluationInterval = 10*time.Minute, time.Minute }) {
		t.Errorf("settings = %+v, want min_runtime 10m, debt_grace 10m, autoscaler_evaluation_interval 1m", settings)
	}
}

func dump(n *Node) []Node {
	var out []Node
	n.Walk(func(x *Node) {
		c := *x
		c.Children = nil
		out = append(out, c)
	})
	return out
}

func TestLoadFileOfAMissingFileFails(t *testing.T) {
	_, _, err := LoadFile(filepath.Join(t.TempDir(), "absent.hcl"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want a not-exist error", err)
	}
}

func TestParseAcceptsDeepTreesAndOptionalFlags(t *testing.T) {
	src := `
quota "root" {
  gpus = 64
  quota "a" {
    gpus = 32
    priority_preemption = true
    quota "a.1" {
      gpus = 16
      child_preemption = true
      quota "a.1.x" {
        gpus = 8
        namespaces = ["deep-1", "deep-2"]
      }
    }
  }
  quota "b" {
    gpus = 0
  }
}
`
	root, settings, err := Parse([]byte(src), "deep.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if settings != DefaultSettings() {
		t.Errorf("settings = %+v, want the defaults %+v", settings, DefaultSettings())
	}
	var got []string
	root.Walk(func(n *Node) {
		got = append(got, n.Name+"@"+n.Pos)
	})
	want := []string{"root@deep.hcl:2", "a@deep.hcl:4", "a.1@deep.hcl:7", "a.1.x@deep.hcl:10", "b@deep.hcl:16"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodes = %v, want %v", got, want)
	}
	a := root.Find("a")
	if !a.PriorityPreemption || a.ChildPreemption || a.GPUs.Of(ImplicitFlavor) != 32 {
		t.Errorf("a = %+v, want 32 GPUs, priority preemption only", *a)
	}
	a1 := root.Find("a.1")
	if !a1.ChildPreemption || a1.PriorityPreemption {
		t.Errorf("a.1 = %+v, want child preemption only", *a1)
	}
	if x := root.Find("a.1.x"); !reflect.DeepEqual(x.Namespaces, []string{"deep-1", "deep-2"}) {
		t.Errorf("a.1.x namespaces = %v", x.Namespaces)
	}
	if b := root.Find("b"); b.GPUs.Of(ImplicitFlavor) != 0 || b.Children != nil {
		t.Errorf("b = %+v, want 0 GPUs and no children", *b)
	}
}

// defaultsWith returns the default settings changed by fn.
func defaultsWith(fn func(*Settings)) Settings {
	s := DefaultSettings()
	fn(&s)
	return s
}

func TestParseSettings(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want Settings
	}{
		{"an absent settings block gives the defaults",
			`quota "q" { gpus = 1 }`,
			DefaultSettings()},
		{"an empty settings block gives the defaults",
			"settings {}\nquota \"q\" { gpus = 1 }",
			DefaultSettings()},
		{"min_runtime alone keeps the default debt grace",
			"settings {\n min_runtime = \"90s\"\n}\nquota \"q\" { gpus = 1 }",
			defaultsWith(func(s *Settings) { s.MinRuntime = 90 * time.Second })},
		{"a zero debt grace is kept, not replaced by the default",
			"settings {\n debt_grace = \"0s\"\n}\nquota \"q\" { gpus = 1 }",
			defaultsWith(func(s *Settings) { s.DebtGrace = 0 })},
		{"the calendar and flex settings are read",
			"settings {\n settle = \"45s\"\n drain_margin = \"2m\"\n drain_horizon = \"30m\"\n reservation_max_ahead = \"48h\"\n reservation_min_duration = \"2m\"\n autoscaler_evaluation_interval = \"1m\"\n}\nquota \"q\" { gpus = 1 }",
			Settings{DebtGrace: 10 * time.Minute, Settle: 45 * time.Second, DrainMargin: 2 * time.Minute,
				DrainHorizon: 30 * time.Minute, ReservationMaxAhead: 48 * time.Hour, ReservationMinDuration: 2 * time.Minute,
				AutoscalerEvaluationInterval: time.Minute, ReservationMaxPerNamespace: DefaultReservationMaxPerNamespace}},
		{"reservation_max_per_namespace is a whole number",
			"settings {\n reservation_max_per_namespace = 5\n}\nquota \"q\" { gpus = 1 }",
			defaultsWith(func(s *Settings) { s.ReservationMaxPerNamespace = 5 })},
		{"compound durations are read in Go syntax",
			"quota \"q\" { gpus = 1 }\nsettings {\n min_runtime = \"1h30m\"\n debt_grace = \"2h\"\n}",
			defaultsWith(func(s *Settings) { s.MinRuntime, s.DebtGrace = 90*time.Minute, 2*time.Hour })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := Parse([]byte(tt.src), "s.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("settings = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestParseRejectsTreesThatBreakL1 checks each L1 violation (DESIGN §3) with
// its exact message: file, line, node name and numbers.
func TestParseRejectsTreesThatBreakL1(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"children whose nominal sums above the parent's are rejected with the sum and the parts",
			`quota "Quota1" {
  gpus = 128
  quota "Quota1.1" { gpus = 56 }
  quota "Quota1.2" { gpus = 80 }
}`,
			`l1.hcl:1: quota "Quota1": children's nominal GPUs sum to 136 (Quota1.1 56 + Quota1.2 80), more than its nominal 128`},
		{"an over-full grandchild level is reported at the child",
			`quota "r" {
  gpus = 10
  quota "c" {
    gpus = 10
    quota "g1" { gpus = 6 }
    quota "g2" { gpus = 5 }
  }
}`,
			`l1.hcl:3: quota "c": children's nominal GPUs sum to 11 (g1 6 + g2 5), more than its nominal 10`},
		{"a name used twice is rejected at its second use",
			`quota "Quota1" {
  gpus = 8
  quota "Quota1" { gpus = 4 }
}`,
			`l1.hcl:3: quota "Quota1": name used twice (first at l1.hcl:1)`},
		{"an empty name is rejected",
			`quota "" { gpus = 8 }`,
			`l1.hcl:1: name "" is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{"a negative nominal is rejected",
			`quota "r" {
  gpus = 8
  quota "c" { gpus = -2 }
}`,
			`l1.hcl:3: quota "c": gpus = -2 is negative`},
		{"a namespace bound to two nodes is rejected",
			`quota "Quota1" {
  gpus = 128
  namespaces = ["workspace-a"]
  quota "Quota1.1" {
    gpus = 48
    namespaces = ["workspace-b", "workspace-a"]
  }
}`,
			`l1.hcl:4: quota "Quota1.1": namespace "workspace-a" is already bound to quota "Quota1"`},
		{"a namespace listed twice on one node is rejected",
			`quota "r" {
  gpus = 1
  namespaces = ["ns", "ns"]
}`,
			`l1.hcl:1: quota "r": namespace "ns" is already bound to quota "r"`},
		{"an empty namespace name is rejected",
			`quota "r" {
  gpus = 1
  namespaces = [""]
}`,
			`l1.hcl:1: quota "r": namespaces[0] = "" is not a namespace name (empty, or with leading or trailing space)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, _, err := Parse([]byte(tt.src), "l1.hcl")
			if err == nil {
				t.Fatalf("no error; tree %+v", dump(root))
			}
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Errorf("err is %T, want *ValidationError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("err =\n%s\nwant\n%s", err, tt.want)
			}
			if root != nil {
				t.Errorf("a tree came back with the error")
			}
		})
	}
}

func TestParseRejectsBadFiles(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"a file without a quota block is rejected",
			"settings {\n min_runtime = \"1m\"\n}\n",
			`bad.hcl: no quota block; the tree needs exactly one root quota block`},
		{"an empty file is rejected",
			"",
			`bad.hcl: no quota block; the tree needs exactly one root quota block`},
		{"two root quota blocks are rejected at the second",
			"quota \"a\" { gpus = 1 }\n\nquota \"b\" { gpus = 1 }\n",
			`bad.hcl:3: quota "b": a second root quota block; the tree has exactly one root ("a" at bad.hcl:1)`},
		{"a setting above MaxSetting is rejected with the value",
			"settings {\n  drain_margin = \"2562047h\"\n}\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:2: settings.drain_margin = "2562047h" is more than 87600h0m0s`},
		{"two settings blocks are rejected",
			"settings {}\nsettings {}\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:2: settings block given twice`},
		{"an unknown attribute in a quota block is rejected",
			"quota \"a\" {\n  gpus = 1\n  gpu_count = 2\n}\n",
			`bad.hcl:3: quota "a": Unsupported argument; An argument named "gpu_count" is not expected here.`},
		{"an unknown block in a quota block is rejected",
			"quota \"a\" {\n  gpus = 1\n  limits {\n  }\n}\n",
			`bad.hcl:3: quota "a": Unsupported block type; Blocks of type "limits" are not expected here.`},
		{"an unknown top-level attribute is rejected",
			"cluster = \"x\"\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:1: Unsupported argument; An argument named "cluster" is not expected here.`},
		{"an unknown settings attribute is rejected",
			"settings {\n  grace = \"1m\"\n}\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:2: Unsupported argument; An argument named "grace" is not expected here.`},
		{"a quota block without gpus is rejected",
			"quota \"a\" {\n  namespaces = [\"x\"]\n}\n",
			`bad.hcl:1: quota "a": Missing required argument; The argument "gpus" is required, but no definition was found.`},
		{"a quota block without a name is rejected",
			"quota {\n  gpus = 1\n}\n",
			`bad.hcl:1: Missing name for quota; All quota blocks must have 1 labels (name).`},
		{"a fractional gpus value is rejected with the value",
			"quota \"a\" {\n  gpus = 1.5\n}\n",
			`bad.hcl:2: quota "a": gpus = 1.5 is not a whole number`},
		{"a gpus value beyond the range of an int is too large, not of the wrong type",
			"quota \"a\" {\n  gpus = 99999999999999999999999\n}\n",
			`bad.hcl:2: quota "a": gpus = 99999999999999999999999 is too large (at most 2147483647)`},
		{"a gpus value with a huge exponent is too large",
			"quota \"a\" {\n  gpus = 1e400\n}\n",
			`bad.hcl:2: quota "a": gpus = 1e400 is too large (at most 2147483647)`},
		{"a hugely negative gpus value is negative",
			"quota \"a\" {\n  gpus = -99999999999999999999999\n}\n",
			`bad.hcl:2: quota "a": gpus = -99999999999999999999999 is negative`},
		{"a null gpus value is rejected",
			"quota \"a\" {\n  gpus = null\n}\n",
			`bad.hcl:2: quota "a": gpus = null: Unsuitable value type; Unsuitable value: null value is not allowed`},
		{"a tree deeper than MaxDepth is rejected at the first node too deep",
			strings.Repeat("quota \"q\" {\n  gpus = 0\n", MaxDepth+1) + strings.Repeat("}\n", MaxDepth+1),
			fmt.Sprintf(`bad.hcl:%d: quota "q": the quota tree is more than 32 levels deep`, 2*MaxDepth+1)},
		{"a string gpus value is rejected with the value",
			"quota \"a\" {\n  gpus = \"many\"\n}\n",
			`bad.hcl:2: quota "a": gpus = "many": Unsuitable value type; Unsuitable value: a number is required`},
		{"a gpus value beyond MaxGPUs is rejected with both numbers",
			"quota \"a\" {\n  gpus = 4294967296\n}\n",
			`bad.hcl:2: quota "a": gpus = 4294967296 is too large (at most 2147483647)`},
		{"a variable reference is rejected",
			"quota \"a\" {\n  gpus = var.gpus\n}\n",
			`bad.hcl:2: quota "a": gpus = var.gpus: Variables not allowed; Variables may not be used here.`},
		{"a non-boolean child_preemption is rejected with the value",
			"quota \"a\" {\n  gpus = 1\n  child_preemption = \"sometimes\"\n}\n",
			`bad.hcl:3: quota "a": child_preemption = "sometimes": Unsuitable value type; Unsuitable value: a bool is required`},
		{"namespaces given as a string is rejected with the value",
			"quota \"a\" {\n  gpus = 1\n  namespaces = {a = 1}\n}\n",
			`bad.hcl:3: quota "a": namespaces = {a = 1}: Unsuitable value type; Unsuitable value: list of string required, but have object`},
		{"a null namespace is rejected with its index",
			"quota \"a\" {\n  gpus = 1\n  namespaces = [\"x\", null]\n}\n",
			`bad.hcl:3: quota "a": namespaces = ["x", null]: Unsuitable value type; Unsuitable value: element 1: null value is not allowed`},
		{"a list namespace is rejected with its index",
			"quota \"a\" {\n  gpus = 1\n  namespaces = [\"x\", [\"y\"]]\n}\n",
			`bad.hcl:3: quota "a": namespaces = ["x", ["y"]]: Unsuitable value type; Unsuitable value: element 1: string required, but have tuple`},
		{"a number namespace is rejected with its index and value, not read as a string",
			"quota \"a\" {\n  gpus = 1\n  namespaces = [1]\n}\n",
			`bad.hcl:3: quota "a": namespaces = [1]: Unsuitable value type; Unsuitable value: element 0: string required, but have number 1`},
		{"a fractional number namespace is rejected with its value",
			"quota \"a\" {\n  gpus = 1\n  namespaces = [\"x\", 1.5]\n}\n",
			`bad.hcl:3: quota "a": namespaces = ["x", 1.5]: Unsuitable value type; Unsuitable value: element 1: string required, but have number 1.5`},
		{"a bool namespace is rejected with its index and value",
			"quota \"a\" {\n  gpus = 1\n  namespaces = [true]\n}\n",
			`bad.hcl:3: quota "a": namespaces = [true]: Unsuitable value type; Unsuitable value: element 0: string required, but have bool true`},
		{"a duration without a unit is rejected with the value",
			"settings {\n  min_runtime = \"10\"\n}\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:2: settings.min_runtime = "10" is not a duration (Go syntax such as "90s", "10m", "1h30m")`},
		{"reservation_max_per_namespace = 0 is rejected with the bounds",
			"settings {\n  reservation_max_per_namespace = 0\n}\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:2: settings.reservation_max_per_namespace = 0 must be a whole number from 1 to 10000`},
		{"reservation_max_per_namespace above the bound is rejected",
			"settings {\n  reservation_max_per_namespace = 10001\n}\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:2: settings.reservation_max_per_namespace = 10001 must be a whole number from 1 to 10000`},
		{"a fractional reservation_max_per_namespace is rejected",
			"settings {\n  reservation_max_per_namespace = 2.5\n}\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:2: settings.reservation_max_per_namespace = 2.5 must be a whole number from 1 to 10000`},
		{"a string reservation_max_per_namespace is rejected",
			"settings {\n  reservation_max_per_namespace = \"5\"\n}\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:2: settings.reservation_max_per_namespace = "5" must be a whole number from 1 to 10000`},
		{"a negative duration is rejected with the value",
			"settings {\n  debt_grace = \"-5m\"\n}\nquota \"a\" { gpus = 1 }\n",
			`bad.hcl:2: settings.debt_grace = "-5m" is negative`},
		{"an unclosed block is a syntax error with its line",
			"\nquota \"a\" {\n  gpus = 1\n",
			`bad.hcl:2: Unclosed configuration block; There is no closing brace for this block before the end of the file. This may be caused by incorrect brace nesting elsewhere in this file.`},
		{"an error in a nested block names that block",
			"quota \"a\" {\n  gpus = 2\n  quota \"b\" {\n    gpus = 1\n    quota \"c\" {\n      gpus = true\n    }\n  }\n}\n",
			`bad.hcl:6: quota "c": gpus = true: Unsuitable value type; Unsuitable value: number required, but have bool`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, _, err := Parse([]byte(tt.src), "bad.hcl")
			if err == nil {
				t.Fatalf("no error; tree %+v", dump(root))
			}
			if err.Error() != tt.want {
				t.Errorf("err =\n%s\nwant\n%s", err, tt.want)
			}
			var perr *ParseError
			if !errors.As(err, &perr) {
				t.Errorf("err is %T, want *ParseError", err)
			}
			if root != nil {
				t.Errorf("a tree came back with the error")
			}
		})
	}
}

// FuzzParse checks that no input makes Parse panic, and that every tree it
// accepts passes Validate and has a position on each node.
func FuzzParse(f *testing.F) {
	ref, err := os.ReadFile(filepath.Join("..", "..", "examples", "reference", "quota.hcl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ref)
	f.Add([]byte(`quota "a" { gpus = 1 }`))
	f.Add([]byte("settings {\n min_runtime = \"1m\"\n debt_grace = \"0s\"\n}\nquota \"a\" {\n gpus = 4\n priority_preemption = true\n quota \"b\" { gpus = 2 }\n}\n"))
	f.Add([]byte(`quota "a" { gpus = 1.5 }`))
	f.Add([]byte(`quota "a" { gpus = [for x in [1]: x] }`))
	f.Add([]byte(`quota "a" { gpus = upper("x") }`))
	f.Add([]byte(`quota "a" { gpus = "${1}" }`))
	// Names outside ValidName (issue 16): a newline, NUL and U+202E as
	// escapes and raw, a space, an empty label, 129 characters.
	f.Add([]byte("quota \"r\" {\n gpus = 2\n quota \"a\\nb\" { gpus = 1 }\n quota \"c\\u0000\\u202e\" { gpus = 1 }\n}\n"))
	f.Add([]byte("quota \"a\u202eb\" { gpus = 1 }\nquota \"\" { gpus = 1 }"))
	f.Add([]byte(`quota "team a" { gpus = 1 }`))
	f.Add([]byte(`quota "` + strings.Repeat("x", 129) + `" { gpus = 1 }`))
	// Flavors (DESIGN L13): declared in order, nominals by flavor, and the
	// bad inputs of issue 17.
	f.Add([]byte(flavorFile))
	f.Add([]byte("flavor \"h\" { models = [\"H\"] }\nquota \"a\" { gpus = 3 }"))
	f.Add([]byte("flavor \"h\" { models = [\"H\"] }\nflavor \"g\" { models = [\"H\"] }\nquota \"a\" { gpus = { h = 1 } }"))
	f.Add([]byte("flavor \"m\" { models = [] \n mig_profile = \"1g.5gb\" }\nquota \"a\" { gpus = { m = 1, x = 2 } }"))
	f.Add([]byte("flavor \"h\" { models = [\"H\", 1] }\nquota \"a\" { gpus = { h = -1 } }"))
	// Eviction budgets (DESIGN L14), well formed and not.
	f.Add([]byte("quota \"a\" {\n gpus = 4\n max_evict = { gpus = 2, per = \"10m\" }\n quota \"b\" {\n gpus = 2\n max_evict = { gpus = 0, per = \"24h\" }\n }\n}\n"))
	f.Add([]byte(`quota "a" { 
 gpus = 4
 max_evict = { gpus = -1, per = "-1s", x = 1 }
}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		root, _, err := Parse(src, "fuzz.hcl")
		if err != nil {
			if root != nil {
				t.Fatalf("a tree came back with the error %v", err)
			}
			return
		}
		if verr := Validate(root); verr != nil {
			t.Fatalf("accepted a tree that Validate rejects: %v", verr)
		}
		root.Walk(func(n *Node) {
			if n.Pos == "" {
				t.Fatalf("node %q has no position", n.Name)
			}
			if !ValidName(n.Name) {
				t.Fatalf("accepted the node name %q", n.Name)
			}
		})
	})
}

func TestParseAcceptsATreeOfMaxDepth(t *testing.T) {
	var src strings.Builder
	for i := 0; i < MaxDepth; i++ {
		fmt.Fprintf(&src, "quota \"q%d\" {\n  gpus = 1\n  namespaces = [\"ns-%d\"]\n", i, i)
	}
	src.WriteString(strings.Repeat("}\n", MaxDepth))
	root, _, err := Parse([]byte(src.String()), "deep.hcl")
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for n := root; n != nil; depth++ {
		if len(n.Children) == 0 {
			n = nil
		} else {
			n = n.Children[0]
		}
	}
	if depth != MaxDepth {
		t.Errorf("depth %d, want %d", depth, MaxDepth)
	}
}

func TestLoadFileRejectsAFileLargerThanMaxFileSize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.hcl")
	src := []byte("quota \"a\" {\n  gpus = 1\n}\n")
	src = append(src, bytes.Repeat([]byte("# padding\n"), MaxFileSize/10+1)...)
	if err := os.WriteFile(p, src, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := LoadFile(p)
	want := p + ": the file is larger than 1 MiB, the most a quota file may be"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

// TestParseRejectsSourcesThatWouldOverflowTheParsersStack checks shapes
// that made hclsyntax's recursive parser overflow the goroutine stack (a
// fatal error, not a panic: the process died) or take a gigabyte of stack.
func TestParseRejectsSourcesThatWouldOverflowTheParsersStack(t *testing.T) {
	const n = 5000 // the guard's limits are far lower; 200,000 crashed before it
	for _, tt := range []struct{ name, src, want string }{
		{"nested brackets", "quota \"q\" {\n  gpus = 1\n  namespaces = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n}\n",
			"bad.hcl:3: brackets, braces, strings or templates nested more than 64 levels deep"},
		{"nested parentheses", "quota \"q\" {\n  gpus = " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + "\n}\n",
			"bad.hcl:2: brackets, braces, strings or templates nested more than 64 levels deep"},
		{"nested templates", "quota \"q\" {\n  gpus = " + strings.Repeat(`"${`, n) + "1" + strings.Repeat(`}"`, n) + "\n}\n",
			"bad.hcl:2: brackets, braces, strings or templates nested more than 64 levels deep"},
		{"nested objects", "quota \"q\" {\n  gpus = 1\n  namespaces = " + strings.Repeat("{a = ", n) + "1" + strings.Repeat("}", n) + "\n}\n",
			"bad.hcl:3: brackets, braces, strings or templates nested more than 64 levels deep"},
		{"nested blocks", strings.Repeat("quota \"q\" {\n", n) + strings.Repeat("}\n", n),
			"bad.hcl:65: brackets, braces, strings or templates nested more than 64 levels deep"},
		{"a splat chain", "quota \"q\" {\n  gpus = 1\n  namespaces = [\"a\"]" + strings.Repeat("[*]", n) + "\n}\n",
			"bad.hcl:3: an expression chains more than 256 operators, brackets or traversal steps"},
		{"unary minus", "quota \"q\" {\n  gpus = " + strings.Repeat("-", n) + "1\n}\n",
			"bad.hcl:2: an expression chains more than 256 operators, brackets or traversal steps"},
		{"conditionals", "quota \"q\" {\n  gpus = (" + strings.Repeat("true ?\n 1 :\n ", n) + "1)\n}\n",
			"bad.hcl:256: an expression chains more than 256 operators, brackets or traversal steps"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tt.src), "bad.hcl")
			if err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %s", err, tt.want)
			}
		})
	}
	// Long lists are fine: commas separate their elements. (They are read
	// element by element: go-cty's tuple-to-list conversion is quadratic,
	// and this list took 4 s.)
	ns := make([]string, 20000)
	for i := range ns {
		ns[i] = fmt.Sprintf("%q", fmt.Sprintf("ns-%d", i))
	}
	src := "quota \"q\" {\n  gpus = 1 + 1\n  namespaces = [\n" + strings.Join(ns, ",\n") + "\n  ]\n}\n"
	if _, _, err := Parse([]byte(src), "long.hcl"); err != nil {
		t.Errorf("a list of 20,000 namespaces is rejected: %v", err)
	}
}

func TestValidateBoundsDepthNamesAndMessages(t *testing.T) {
	deep := &Node{Name: "n0", GPUs: Plain(1)}
	n := deep
	for i := 1; i <= MaxDepth; i++ { // MaxDepth+1 levels
		c := &Node{Name: fmt.Sprintf("n%d", i), GPUs: Plain(1)}
		n.Children = []*Node{c}
		n = c
	}
	wide := &Node{Name: "wide", GPUs: Plain(10)}
	for i := 0; i < 20; i++ {
		wide.Children = append(wide.Children, &Node{Name: fmt.Sprintf("c%02d", i), GPUs: Plain(1)})
	}
	cases := []struct {
		name string
		root *Node
		want string
	}{
		{"a tree deeper than MaxDepth is rejected", deep, `quota "n32": the tree is deeper than 32 levels`},
		{"a namespace with spaces is rejected", &Node{Name: "r", GPUs: Plain(1), Namespaces: []string{" x"}},
			`quota "r": namespaces[0] = " x" is not a namespace name (empty, or with leading or trailing space)`},
		{"a wide sum names the first eight children", wide,
			`quota "wide": children's nominal GPUs sum to 20 (c00 1 + c01 1 + c02 1 + c03 1 + c04 1 + c05 1 + c06 1 + c07 1 + 12 more), more than its nominal 10`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.root)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// OutOfBounds names the first duration setting out of [0, MaxSetting] by
// its settings block name; the defaults are within bounds.
func TestSettingsOutOfBounds(t *testing.T) {
	type res struct {
		Name    string
		Value   time.Duration
		Problem string
	}
	for _, tt := range []struct {
		s    Settings
		want res
	}{
		{DefaultSettings(), res{}},
		{defaultsWith(func(s *Settings) { s.DrainMargin = -time.Second }), res{"drain_margin", -time.Second, "is negative"}},
		{defaultsWith(func(s *Settings) { s.ReservationMinDuration = MaxSetting + 1 }), res{"reservation_min_duration", MaxSetting + 1, "is more than 87600h0m0s"}},
		{defaultsWith(func(s *Settings) { s.MinRuntime, s.Settle = MaxSetting, -1 }), res{"settle", -1, "is negative"}},
	} {
		var got res
		got.Name, got.Value, got.Problem = tt.s.OutOfBounds()
		if got != tt.want {
			t.Errorf("OutOfBounds(%+v) = %+v, want %+v", tt.s, got, tt.want)
		}
	}
}

// A tree stored before reservation_max_per_namespace existed has 0 there:
// it reads as the default, 100.
func TestMaxPerNamespaceDefault(t *testing.T) {
	if got := (Settings{}).MaxPerNamespace(); got != 100 {
		t.Errorf("zero setting: %d, want the default 100", got)
	}
	if got := (Settings{ReservationMaxPerNamespace: 7}).MaxPerNamespace(); got != 7 {
		t.Errorf("setting 7: %d", got)
	}
	if got := DefaultSettings().ReservationMaxPerNamespace; got != 100 {
		t.Errorf("DefaultSettings: %d, want 100", got)
	}
}

// Quota node names are 1 to 128 letters, digits, '.', '_' or '-' (issue
// 16): a newline, NUL, U+202E, a space or 129 characters are refused as bad
// input (BadName), the name quoted with %q (and cut when long), in HCL and
// in trees built any other way (Validate).
func TestNodeNames(t *testing.T) {
	long := strings.Repeat("a", 5000)
	for _, tc := range []struct {
		name string
		ok   bool
		want string
	}{
		{"Quota1.1", true, ""},
		{"a_b-c.D9", true, ""},
		{strings.Repeat("x", 128), true, ""},
		{"", false, `name "" is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{"a\nb", false, `name "a\nb" is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{"a\x00b", false, `name "a\x00b" is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{"abc\u202edef", false, `name "abc\u202edef" is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{"team a", false, `name "team a" is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{"Quota/1", false, `name "Quota/1" is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{"é", false, `name "é" is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{strings.Repeat("x", 129), false, `name "` + strings.Repeat("x", 64) + `"... (129 bytes) is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{long, false, `name "` + strings.Repeat("a", 64) + `"... (5000 bytes) is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'`},
	} {
		err := Validate(&Node{Name: "root", GPUs: Plain(8), Pos: "t.hcl:1", Children: []*Node{{Name: tc.name, GPUs: Plain(1), Pos: "t.hcl:2"}}})
		if tc.ok {
			if err != nil {
				t.Errorf("name %q: %v", tc.name, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || !ve.BadName || err.Error() != "t.hcl:2: "+tc.want {
			t.Errorf("name %.80q: %v (BadName %t), want t.hcl:2: %s", tc.name, err, ve != nil && ve.BadName, tc.want)
		}
	}
	// The HCL file: a label with a newline (an escape in the label).
	_, _, err := Parse([]byte("quota \"root\" {\n  gpus = 8\n  quota \"a\\nb\" { gpus = 1 }\n}\n"), "q.hcl")
	if err == nil || err.Error() != `q.hcl:3: name "a\nb" is not a quota node name: want 1 to 128 letters, digits, '.', '_' or '-'` {
		t.Errorf("HCL label with a newline: %v", err)
	}
}

// flavorFile is a quota file with three flavors (DESIGN L13): two models,
// MIG slices of one of them, nominals by flavor with one left out.
const flavorFile = `flavor "h100" {
  models = ["NVIDIA H100 80GB HBM3"]
}
quota "Quota1" {
  gpus = { h100 = 64, a100 = 48, a100-1g = 14 }
  child_preemption = true
  quota "Quota1.1" {
    gpus = { h100 = 16, a100 = 32 }
  }
  quota "Quota1.2" {
    gpus = { "h100" = 48, a100-1g = 14 }
  }
}
flavor "a100-1g" {
  models      = ["NVIDIA A100-SXM4-40GB"]
  mig_profile = "1g.5gb"
}
flavor "a100" {
  models = ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB"]
}
`

func TestParseFlavors(t *testing.T) {
	root, _, err := Parse([]byte(flavorFile), "quota.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := []Flavor{
		{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}, Pos: "quota.hcl:1"},
		{Name: "a100-1g", Models: []string{"NVIDIA A100-SXM4-40GB"}, MIGProfile: "1g.5gb", Pos: "quota.hcl:14"},
		{Name: "a100", Models: []string{"NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB"}, Pos: "quota.hcl:18"},
	}
	if diff := cmp.Diff(want, root.Flavors); diff != "" {
		t.Errorf("flavors, in file order (-want +got):\n%s", diff)
	}
	got := map[string]Nominal{}
	root.Walk(func(n *Node) { got[n.Name] = n.GPUs })
	wantGPUs := map[string]Nominal{
		"Quota1":   {"h100": 64, "a100": 48, "a100-1g": 14},
		"Quota1.1": {"h100": 16, "a100": 32},
		"Quota1.2": {"h100": 48, "a100-1g": 14},
	}
	if diff := cmp.Diff(wantGPUs, got); diff != "" {
		t.Errorf("nominals by flavor (-want +got):\n%s", diff)
	}
	if g := root.Find("Quota1.1").GPUs.Of("a100-1g"); g != 0 {
		t.Errorf("a flavor left out = %d, want 0", g)
	}
	if diff := cmp.Diff([]string{"h100", "a100-1g", "a100"}, FlavorNames(root)); diff != "" {
		t.Errorf("FlavorNames (-want +got):\n%s", diff)
	}
	// The tree's flavors decide which devices it counts (FlavorOf).
	if f, ok := FlavorOf(root.Flavors, "NVIDIA A100-SXM4-40GB", "1g.5gb"); f != "a100-1g" || !ok {
		t.Errorf("FlavorOf(A100 MIG 1g.5gb) = %q, %v", f, ok)
	}
	if f, ok := FlavorOf(root.Flavors, "NVIDIA A100-SXM4-40GB", "2g.10gb"); ok {
		t.Errorf("FlavorOf(A100 MIG 2g.10gb) = %q, want ungoverned", f)
	}
}

func TestParsePlainGPUsOfTheOnlyFlavor(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      Nominal
	}{
		{"no flavor block: the implicit gpu", `quota "a" { gpus = 8 }`, Nominal{"gpu": 8}},
		{"one declared flavor", "flavor \"h100\" { models = [\"H\"] }\nquota \"a\" { gpus = 8 }", Nominal{"h100": 8}},
		{"the implicit flavor by name", `quota "a" { gpus = { gpu = 8 } }`, Nominal{"gpu": 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _, err := Parse([]byte(tc.src), "q.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, root.GPUs); diff != "" {
				t.Errorf("gpus (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseRejectsBadFlavors covers issue 17's bad input: each error names
// the flavor (or the node) and the file:line.
func TestParseRejectsBadFlavors(t *testing.T) {
	const h = "flavor \"h100\" {\n  models = [\"NVIDIA H100\"]\n}\n"
	const a = "flavor \"a100\" {\n  models = [\"NVIDIA A100\"]\n}\n"
	for _, tc := range []struct{ name, src, want string }{
		{"a model in two flavors",
			h + "flavor \"hbis\" {\n  models = [\"NVIDIA H100\"]\n}\nquota \"a\" { gpus = { h100 = 1 } }\n",
			`q.hcl:4: flavor "hbis": model "NVIDIA H100" is already in flavor "h100" (q.hcl:1): a device belongs to one flavor`},
		{"a MIG model with its profile in two flavors",
			"flavor \"x\" {\n  models = [\"A\"]\n  mig_profile = \"1g.5gb\"\n}\nflavor \"y\" {\n  models = [\"A\"]\n  mig_profile = \"1g.5gb\"\n}\nquota \"a\" { gpus = { x = 1 } }\n",
			`q.hcl:5: flavor "y": model "A" with mig_profile "1g.5gb" is already in flavor "x" (q.hcl:1): a device belongs to one flavor`},
		{"an unknown flavor in gpus",
			h + a + "quota \"a\" {\n  gpus = { h100 = 1, b200 = 2 }\n}\n",
			`q.hcl:8: quota "a": gpus names flavor "b200", which the file does not declare (flavors: h100, a100)`},
		{"a flavor in gpus of a file without flavor blocks",
			"quota \"a\" {\n  gpus = { h100 = 1 }\n}\n",
			`q.hcl:2: quota "a": gpus names flavor "h100", which the file does not declare (flavors: none declared, the tree's one flavor is the implicit "gpu")`},
		{"mig_profile without models",
			"flavor \"m\" {\n  models = []\n  mig_profile = \"1g.10gb\"\n}\nquota \"a\" { gpus = 1 }\n",
			`q.hcl:1: flavor "m": mig_profile = "1g.10gb" without models: a MIG flavor names the models of the GPUs it cuts`},
		{"a flavor without models",
			"flavor \"m\" {\n  models = []\n}\nquota \"a\" { gpus = 1 }\n",
			`q.hcl:1: flavor "m": has no models: a flavor names the device models it takes (models = ["NVIDIA H100 80GB HBM3"])`},
		{"a flavor declared twice",
			h + "flavor \"h100\" {\n  models = [\"other\"]\n}\nquota \"a\" { gpus = 1 }\n",
			`q.hcl:4: flavor "h100": declared twice (first at q.hcl:1)`},
		{"a plain number in a tree of two flavors",
			h + a + "quota \"a\" {\n  gpus = 8\n}\n",
			`q.hcl:8: quota "a": gpus = 8 is a plain number, but the tree declares 2 flavors (h100, a100): write gpus = { h100 = ... } by flavor`},
		{"a fractional nominal of a flavor",
			h + "quota \"a\" {\n  gpus = { h100 = 1.5 }\n}\n",
			`q.hcl:5: quota "a": gpus.h100 = { h100 = 1.5 } is not a whole number`},
		{"a string in models",
			"flavor \"m\" {\n  models = [\"A\", 3]\n}\nquota \"a\" { gpus = 1 }\n",
			`q.hcl:2: flavor "m": models = ["A", 3]: element 1 is not a string`},
		{"a bad flavor name",
			"flavor \"h 100\" {\n  models = [\"A\"]\n}\nquota \"a\" { gpus = 1 }\n",
			`q.hcl:1: flavor "h 100": is not a flavor name: want 1 to 128 letters, digits, '.', '_' or '-'`},
		{"L1 per flavor: children above the parent in one flavor",
			h + a + "quota \"r\" {\n  gpus = { h100 = 8, a100 = 8 }\n  quota \"c1\" { gpus = { h100 = 8, a100 = 4 } }\n  quota \"c2\" { gpus = { a100 = 5 } }\n}\n",
			`q.hcl:7: quota "r": children's nominal GPUs of flavor "a100" sum to 9 (c1 4 + c2 5), more than its nominal 8`},
		{"L1 per flavor: a negative nominal names the flavor",
			h + "quota \"r\" {\n  gpus = { h100 = -2 }\n}\n",
			`q.hcl:4: quota "r": gpus of flavor "h100" = -2 is negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _, err := Parse([]byte(tc.src), "q.hcl")
			if err == nil {
				t.Fatalf("no error; tree %+v", dump(root))
			}
			if err.Error() != tc.want {
				t.Errorf("err =\n%s\nwant\n%s", err, tc.want)
			}
			if root != nil {
				t.Errorf("a tree came back with the error")
			}
		})
	}
}

func TestValidateFlavorsOnTheRootOnly(t *testing.T) {
	root := &Node{Name: "r", GPUs: Plain(2), Children: []*Node{
		{Name: "c", GPUs: Plain(1), Flavors: []Flavor{{Name: "x", Models: []string{"X"}}}},
	}}
	err := Validate(root)
	if err == nil || err.Error() != `quota "c": declares flavors; only the tree (its root) does` {
		t.Errorf("Validate = %v", err)
	}
}

func TestFlavorCapacityWarning(t *testing.T) {
	root, _, err := Parse([]byte(flavorFile), "quota.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if w := FlavorCapacityWarning(root, "h100", 64); w != "" {
		t.Errorf("64 of 64: %q", w)
	}
	want := `quota "Quota1": nominal 48 GPUs of flavor "a100" exceeds the 40 healthy GPUs of that flavor in the cluster`
	if w := FlavorCapacityWarning(root, "a100", 40); w != want {
		t.Errorf("warning =\n%s\nwant\n%s", w, want)
	}
	plain := &Node{Name: "Quota1", GPUs: Plain(128)}
	if w := CapacityWarning(plain, 120); w != `quota "Quota1": nominal 128 GPUs exceeds the 120 healthy GPUs in the cluster` {
		t.Errorf("one-flavor warning = %q", w)
	}
}

func TestNominalJSON(t *testing.T) {
	// A tree record stored before flavors wrote the nominal as a number.
	var n Nominal
	if err := json.Unmarshal([]byte(`48`), &n); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Plain(48), n); diff != "" {
		t.Errorf("old number (-want +got):\n%s", diff)
	}
	data, err := json.Marshal(Nominal{"h100": 16, "a100": 32})
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"a100":32,"h100":16}` {
		t.Errorf("Marshal = %s", data)
	}
	var back Nominal
	if err := json.Unmarshal(data, &back); err != nil || back.Of("h100") != 16 || back.Of("a100") != 32 {
		t.Errorf("round trip = %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`"x"`), &back); err == nil {
		t.Errorf("a string nominal was accepted")
	}
}

func TestFlavorChoice(t *testing.T) {
	root, _, err := Parse([]byte(flavorFile), "quota.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FlavorChoice(root, ""); err == nil || err.Error() != "the tree has 3 flavors (h100, a100-1g, a100): name one (flavor)" {
		t.Errorf("no flavor in a tree of three: %v", err)
	}
	if _, err := FlavorChoice(root, "b200"); err == nil || err.Error() != `flavor "b200" is not a flavor of the tree (h100, a100-1g, a100)` {
		t.Errorf("unknown flavor: %v", err)
	}
	if f, err := FlavorChoice(&Node{Name: "r", GPUs: Plain(1)}, ""); f != "gpu" || err != nil {
		t.Errorf("one-flavor tree: %q, %v", f, err)
	}
}

// TestParseWeight: weight is written like gpus (DESIGN L14): a plain
// number is the only flavor's, an object gives it by flavor, a flavor left
// out keeps the default (absent from Node.Weight).
func TestParseWeight(t *testing.T) {
	src := "flavor \"h100\" {\n  models = [\"NVIDIA H100\"]\n}\nflavor \"a100\" {\n  models = [\"NVIDIA A100\"]\n}\n" +
		"quota \"r\" {\n  gpus = { h100 = 8, a100 = 8 }\n  quota \"b\" {\n    gpus = { h100 = 4 }\n    weight = { h100 = 3, a100 = 0 }\n  }\n  quota \"c\" { gpus = { h100 = 4 } }\n}\n"
	root, _, err := Parse([]byte(src), "q.hcl")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Nominal{}
	for _, n := range []*Node{root, root.Children[0], root.Children[1]} {
		got[n.Name] = n.Weight
	}
	if diff := cmp.Diff(map[string]Nominal{"r": nil, "b": {"h100": 3, "a100": 0}, "c": nil}, got); diff != "" {
		t.Errorf("weights (-want +got):\n%s", diff)
	}
	root, _, err = Parse([]byte("quota \"r\" {\n  gpus = 8\n  quota \"b\" {\n    gpus = 2\n    weight = 10000\n  }\n}\n"), "q.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Nominal{ImplicitFlavor: 10000}, root.Children[0].Weight); diff != "" {
		t.Errorf("plain weight (-want +got):\n%s", diff)
	}
}

func TestParseRejectsBadWeights(t *testing.T) {
	const h = "flavor \"h100\" {\n  models = [\"NVIDIA H100\"]\n}\n"
	const a = "flavor \"a100\" {\n  models = [\"NVIDIA A100\"]\n}\n"
	for _, tc := range []struct{ name, src, want string }{
		{"above 10,000",
			"quota \"r\" {\n  gpus = 8\n  weight = 10001\n}\n",
			`q.hcl:3: quota "r": weight = 10001 is out of range (0..10000; DESIGN L14)`},
		{"negative, by flavor",
			h + "quota \"r\" {\n  gpus = { h100 = 8 }\n  weight = { h100 = -1 }\n}\n",
			`q.hcl:6: quota "r": weight of flavor "h100" = -1 is out of range (0..10000; DESIGN L14)`},
		{"an undeclared flavor",
			h + "quota \"r\" {\n  gpus = { h100 = 8 }\n  weight = { b200 = 1 }\n}\n",
			`q.hcl:6: quota "r": weight names flavor "b200", which the file does not declare (flavors: h100)`},
		{"a plain number in a tree of two flavors",
			h + a + "quota \"r\" {\n  gpus = { h100 = 8 }\n  weight = 2\n}\n",
			`q.hcl:9: quota "r": weight = 2 is a plain number, but the tree declares 2 flavors (h100, a100): write weight = { h100 = ... } by flavor`},
		{"not a whole number",
			"quota \"r\" {\n  gpus = 8\n  weight = 1.5\n}\n",
			`q.hcl:3: quota "r": weight = 1.5 is not a whole number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _, err := Parse([]byte(tc.src), "q.hcl")
			if err == nil {
				t.Fatalf("no error; tree %+v", dump(root))
			}
			if err.Error() != tc.want {
				t.Errorf("err =\n%s\nwant\n%s", err, tc.want)
			}
		})
	}
}

func TestValidateRejectsBadWeights(t *testing.T) {
	root := &Node{Name: "r", GPUs: Plain(8), Weight: Plain(MaxWeight + 1), Pos: "t:1"}
	if err := Validate(root); err == nil || err.Error() != `t:1: quota "r": weight = 10001 is out of range (0..10000; DESIGN L14)` {
		t.Errorf("err = %v", err)
	}
	root.Weight = Nominal{"h100": 1}
	if err := Validate(root); err == nil || !strings.Contains(err.Error(), `weight names flavor "h100", which the tree does not declare`) {
		t.Errorf("err = %v", err)
	}
}

// TestParseMaxEvict: max_evict = { gpus, per } is a node's eviction budget
// (DESIGN L14), on any node; a node without it has none.
func TestParseMaxEvict(t *testing.T) {
	src := "quota \"r\" {\n  gpus = 8\n  max_evict = { gpus = 16, per = \"5m\" }\n" +
		"  quota \"b\" {\n    gpus = 2\n    max_evict = { per = \"24h\", gpus = 0 }\n  }\n  quota \"c\" { gpus = 2 }\n}\n"
	root, _, err := Parse([]byte(src), "q.hcl")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*EvictBudget{}
	root.Walk(func(n *Node) { got[n.Name] = n.MaxEvict })
	want := map[string]*EvictBudget{"r": {GPUs: 16, Per: 5 * time.Minute}, "b": {GPUs: 0, Per: 24 * time.Hour}, "c": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("budgets (-want +got):\n%s", diff)
	}
	if w := EvictWindow(root); w != 24*time.Hour {
		t.Errorf("EvictWindow = %s, want 24h", w)
	}
	if diff := cmp.Diff(want["r"], root.Clone().MaxEvict); diff != "" {
		t.Errorf("Clone (-want +got):\n%s", diff)
	}
}

func TestParseRejectsBadMaxEvict(t *testing.T) {
	const head = "quota \"r\" {\n  gpus = 8\n  "
	for _, tc := range []struct{ name, attr, want string }{
		{"a number", `max_evict = 16`,
			`q.hcl:3: quota "r": max_evict = 16: want an object { gpus = 16, per = "5m" } (DESIGN L14)`},
		{"no per", `max_evict = { gpus = 16 }`,
			`q.hcl:3: quota "r": max_evict = { gpus = 16 } lacks per (write max_evict = { gpus = 16, per = "5m" })`},
		{"no gpus", `max_evict = { per = "5m" }`,
			`q.hcl:3: quota "r": max_evict = { per = "5m" } lacks gpus (write max_evict = { gpus = 16, per = "5m" })`},
		{"an unknown key", `max_evict = { gpus = 1, per = "5m", every = "1m" }`,
			`q.hcl:3: quota "r": max_evict has no key "every" (its keys: gpus, per)`},
		{"negative gpus", `max_evict = { gpus = -1, per = "5m" }`,
			`q.hcl:3: quota "r": max_evict.gpus = -1 is negative`},
		{"fractional gpus", `max_evict = { gpus = 1.5, per = "5m" }`,
			`q.hcl:3: quota "r": max_evict.gpus = 1.5 is not a whole number`},
		{"per not a duration", `max_evict = { gpus = 1, per = "5 minutes" }`,
			`q.hcl:3: quota "r": max_evict.per = "5 minutes" is not a duration (Go syntax such as "90s", "5m", "1h")`},
		{"per a number", `max_evict = { gpus = 1, per = 300 }`,
			`q.hcl:3: quota "r": max_evict.per in max_evict = { gpus = 1, per = 300 } is not a string (a Go duration such as "5m")`},
		{"per zero", `max_evict = { gpus = 1, per = "0s" }`,
			`q.hcl:3: quota "r": max_evict.per = "0s" is not above 0 (a Go duration such as "5m")`},
		{"per negative", `max_evict = { gpus = 1, per = "-5m" }`,
			`q.hcl:3: quota "r": max_evict.per = "-5m0s" is not above 0 (a Go duration such as "5m")`},
		{"per above a day", `max_evict = { gpus = 1, per = "25h" }`,
			`q.hcl:3: quota "r": max_evict.per = "25h0m0s" is more than 24h0m0s (DESIGN L14)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _, err := Parse([]byte(head+tc.attr+"\n}\n"), "q.hcl")
			if err == nil {
				t.Fatalf("no error; tree %+v", dump(root))
			}
			if err.Error() != tc.want {
				t.Errorf("err =\n%s\nwant\n%s", err, tc.want)
			}
		})
	}
}

func TestValidateRejectsBadMaxEvict(t *testing.T) {
	for _, tc := range []struct {
		b    EvictBudget
		want string
	}{
		{EvictBudget{GPUs: -1, Per: time.Minute}, `t:1: quota "r": max_evict.gpus = -1 is negative`},
		{EvictBudget{GPUs: MaxGPUs + 1, Per: time.Minute}, `t:1: quota "r": max_evict.gpus = 2147483648 is more than 2147483647`},
		{EvictBudget{GPUs: 1}, `t:1: quota "r": max_evict.per = "0s" is not above 0 (a Go duration such as "5m")`},
		{EvictBudget{GPUs: 1, Per: MaxEvictPer + time.Second}, `t:1: quota "r": max_evict.per = "24h0m1s" is more than 24h0m0s (DESIGN L14)`},
	} {
		b := tc.b
		root := &Node{Name: "r", GPUs: Plain(8), MaxEvict: &b, Pos: "t:1"}
		if err := Validate(root); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: err = %v, want %s", tc.b, err, tc.want)
		}
	}
	root := &Node{Name: "r", GPUs: Plain(8), MaxEvict: &EvictBudget{GPUs: 0, Per: MaxEvictPer}}
	if err := Validate(root); err != nil {
		t.Errorf("the largest window: %v", err)
	}
	if w := EvictWindow(&Node{Name: "r"}); w != 0 {
		t.Errorf("EvictWindow without budgets = %s, want 0", w)
	}
}
