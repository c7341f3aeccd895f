package gpu

import "testing"

func TestMIGProfileName(t *testing.T) {
	cases := map[string]struct {
		gi, ci      uint32
		slice, full uint64
		want        string
	}{
		"A100 40GB 1g.5gb":        {1, 1, 4864, 40960, "1g.5gb"},
		"A100 40GB 2g.10gb":       {2, 2, 9856, 40960, "2g.10gb"},
		"A100 40GB 3g.20gb":       {3, 3, 19968, 40960, "3g.20gb"},
		"A100 40GB 4g.20gb":       {4, 4, 19968, 40960, "4g.20gb"},
		"A100 40GB 7g.40gb":       {7, 7, 40192, 40960, "7g.40gb"},
		"A100 40GB 1c.3g.20gb":    {3, 1, 19968, 40960, "1c.3g.20gb"},
		"H100 80GB 1g.10gb":       {1, 1, 9856, 81920, "1g.10gb"},
		"H100 80GB 7g.80gb":       {7, 7, 80896, 81920, "7g.80gb"},
		"unknown total rounds up": {1, 1, 4864, 0, "1g.5gb"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := MIGProfileName(tc.gi, tc.ci, tc.slice, tc.full); got != tc.want {
				t.Fatalf("MIGProfileName(%d, %d, %d, %d) = %q, want %q", tc.gi, tc.ci, tc.slice, tc.full, got, tc.want)
			}
		})
	}
}
