package report

import (
	"os"
	"testing"

	chart "github.com/wcharczuk/go-chart/v2"

	"github.com/gputide/gputide/quota-broker/sim"
)

func TestDevPNG(t *testing.T) {
	sc, _ := sim.LoadFile("../../../examples/reference/scenario.hcl")
	w, _ := sc.Workload()
	var p sim.Policy = sim.Gputide{}
	if os.Getenv("POL") == "kueue" {
		p = sim.NewKueue(sim.PolicyShares(sc, w))
	}
	r, _ := sim.Run(sc, w, sim.Options{Policy: p})
	f, _ := os.Create("/tmp/occ.png")
	defer f.Close()
	if err := occupancy(f, r, chart.PNG); err != nil {
		t.Fatal(err)
	}
}
