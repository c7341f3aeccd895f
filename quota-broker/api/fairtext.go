package api

import (
	"fmt"
	"math"
	"strconv"
)

// The texts of DESIGN L14's figures of a quota node and flavor, one rule
// for `gputide quota status` and the status page.

// WeightText is a node's weight in the row's flavor (DESIGN L14): "1"
// when set, "8 (nominal)" for the default.
func WeightText(q Quota) string {
	if q.WeightExplicit {
		return strconv.Itoa(q.Weight)
	}
	return strconv.Itoa(q.Weight) + " (nominal)"
}

// FairShareText is a node's fair share in GPUs to one decimal ("3.5",
// "6"), "-" where DESIGN L14 leaves it undefined (the root; by day under a
// parent whose own work takes its children's GPUs).
func FairShareText(q Quota) string {
	if q.FairShare == nil {
		return "-"
	}
	return strconv.FormatFloat(math.Round(*q.FairShare*10)/10, 'f', -1, 64)
}

// BorrowedShareText is a node's borrowed share (borrowed GPUs / weight) to
// two decimals ("0.33"), "inf" for a weight-0 node that borrows.
func BorrowedShareText(q Quota) string {
	x := float64(q.BorrowedShare)
	if math.IsInf(x, 1) {
		return "inf"
	}
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64)
}

// EvictedText is a node's eviction budget use, "3 of 16 GPUs in 5m" (the
// GPUs of every flavor its subtree lost as victims within the window),
// "-" without a budget.
func EvictedText(q Quota) string {
	if q.MaxEvict == nil {
		return "-"
	}
	return fmt.Sprintf("%d of %d GPUs in %s", q.MaxEvict.EvictedGPUs, q.MaxEvict.GPUs, q.MaxEvict.Per)
}
