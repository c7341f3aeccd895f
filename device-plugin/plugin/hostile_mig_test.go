package plugin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
)

// A mock_mig entry whose GPU index is the largest int must be refused, not
// loop: the range loop's i++ overflowed past it and never ended, filling
// the map.
func TestDecodeConfigMockMIGIndexAtMaxInt(t *testing.T) {
	for _, entry := range []string{
		"9223372036854775807:1g.5gb",
		"9223372036854775806-9223372036854775807:1g.5gb",
		"99999999999999999999:1g.5gb",
	} {
		done := make(chan error, 1)
		go func() {
			_, err := DecodeConfig(encode(t, fmt.Sprintf("mock_mig = [%q]", entry)))
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "mock_mig") || !strings.Contains(err.Error(), entry) {
				t.Errorf("entry %q: error %v, want one naming mock_mig and the entry", entry, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("entry %q: DecodeConfig still running after 5s", entry)
		}
	}
}

// A GPU has at most 7 MIG instances: an entry listing more is refused when
// parsed, before its names are expanded per GPU and joined into messages
// (a list of thousands of "7x1g.5gb" made megabytes of error text per GPU).
func TestDecodeConfigMockMIGTooManyInstances(t *testing.T) {
	for _, body := range []string{
		`mock_mig = ["0:1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb"]`,
		`mock_mig = ["0-15:` + strings.Repeat("7x1g.5gb,", 20000) + `"]`,
	} {
		_, err := DecodeConfig(encode(t, "backend = \"mock\"\nmock_profile = \"dgxa100:16\"\n"+body))
		if err == nil || !strings.Contains(err.Error(), "more than 7 MIG instances") {
			t.Fatalf("error %.200v: want one saying more than 7 MIG instances", err)
		}
		if len(err.Error()) > 2*len(body)+1000 {
			t.Fatalf("error is %d bytes for a config of %d", len(err.Error()), len(body))
		}
	}
}

// mock_gpu_name is sent to Nomad as a protobuf string, which must be
// UTF-8: a name that is not is refused at SetConfig, not at every
// fingerprint.
func TestDecodeConfigMockGPUNameNotUTF8(t *testing.T) {
	attrs := map[string]cty.Value{}
	for name, typ := range SchemaType().AttributeTypes() {
		attrs[name] = cty.NullVal(typ)
	}
	attrs["mock_gpu_name"] = cty.StringVal("A100\xff")
	raw, err := ctymsgpack.Marshal(cty.ObjectVal(attrs), SchemaType())
	if err != nil {
		t.Fatal(err)
	}
	_, err = DecodeConfig(raw)
	if err == nil || !strings.Contains(err.Error(), "mock_gpu_name") || !strings.Contains(err.Error(), "not UTF-8") {
		t.Fatalf("error %v: want one naming mock_gpu_name and UTF-8", err)
	}
}
