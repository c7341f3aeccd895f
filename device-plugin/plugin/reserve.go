package plugin

import (
	"context"
	"fmt"
	"strings"

	"github.com/gputide/gputide/device-plugin/proto/devicepb"
)

// VisibleDevicesEnv is the variable the NVIDIA container toolkit reads.
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// Reserve gives a task the devices ids (GPU or MIG UUIDs from the last
// fingerprint): NVIDIA_VISIBLE_DEVICES is the IDs joined with ",", in the
// order given. No IDs gives an empty reservation. IDs that the last
// fingerprint lacks (or ignores) fail with "unknown device IDs: a, b".
func (p *Plugin) Reserve(ctx context.Context, ids []string) (*devicepb.ContainerReservation, error) {
	if len(ids) == 0 {
		return &devicepb.ContainerReservation{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	snap, err := p.waitSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(snap.inv.Devices))
	for _, d := range snap.inv.Devices {
		if !snap.ignoredDevice(d) {
			known[d.UUID] = true
		}
	}
	var unknown []string
	for _, id := range ids {
		if !known[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown device IDs: %s", strings.Join(unknown, ", "))
	}
	for _, id := range ids {
		if st, ok := snap.status[id]; ok && !st.Healthy {
			p.log.Warn("reserving an unhealthy device", "id", id, "health", st.Description)
		}
	}
	return &devicepb.ContainerReservation{
		Envs: map[string]string{VisibleDevicesEnv: strings.Join(ids, ",")},
	}, nil
}
