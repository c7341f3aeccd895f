// Package nomadsim does, for tests, what a Nomad client does with a device
// plugin's answers, without importing Nomad: it turns a ConfigSchema spec
// into an hcldec spec (as Nomad's hclspecutils does), decodes an HCL config
// block against it and encodes the result with go-cty msgpack (as the
// plugin loader does before SetConfig), and validates a fingerprint with the
// client's rules (non-empty names and IDs, one value per attribute, units
// from Nomad's unit table). Sources: shared/reference/
// nomad-device-plugin-protocol.md sections 1 and 3.
package nomadsim

import (
	"errors"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	"github.com/gputide/gputide/device-plugin/proto/devicepb"
	"github.com/gputide/gputide/device-plugin/proto/hclspecpb"
	"github.com/gputide/gputide/device-plugin/proto/structspb"
)

// Units is Nomad's attribute unit table (plugins/shared/structs units).
var Units = map[string]bool{}

func init() {
	for _, u := range []string{
		"KiB", "MiB", "GiB", "TiB", "PiB", "EiB",
		"kB", "KB", "MB", "GB", "TB", "PB", "EB",
		"MHz", "GHz",
		"mW", "W", "kW", "MW", "GW",
	} {
		Units[u] = true
	}
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "kB", "KB", "MB", "GB", "TB", "PB", "EB"} {
		Units[u+"/s"] = true
	}
}

// Convert turns a plugin's spec into an hcldec.Spec. name is the default
// name of an Attr or Block whose own name is empty (an Object's key).
func Convert(s *hclspecpb.Spec) (hcldec.Spec, error) { return convert(s, "") }

func convert(s *hclspecpb.Spec, name string) (hcldec.Spec, error) {
	if s == nil {
		return nil, errors.New("nil spec")
	}
	pick := func(n string) string {
		if n != "" {
			return n
		}
		return name
	}
	switch b := s.Block.(type) {
	case *hclspecpb.Spec_Object:
		out := hcldec.ObjectSpec{}
		for k, v := range b.Object.GetAttributes() {
			c, err := convert(v, k)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = c
		}
		return out, nil
	case *hclspecpb.Spec_Array:
		out := hcldec.TupleSpec{}
		for _, v := range b.Array.GetValues() {
			c, err := convert(v, "")
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	case *hclspecpb.Spec_Attr:
		expr, diags := hclsyntax.ParseExpression([]byte(b.Attr.GetType()), "type", hcl.InitialPos)
		if diags.HasErrors() {
			return nil, diags
		}
		t, diags := typeexpr.TypeConstraint(expr)
		if diags.HasErrors() {
			return nil, diags
		}
		return &hcldec.AttrSpec{Name: pick(b.Attr.GetName()), Type: t, Required: b.Attr.GetRequired()}, nil
	case *hclspecpb.Spec_BlockValue:
		nested, err := convert(b.BlockValue.GetNested(), "")
		if err != nil {
			return nil, err
		}
		return &hcldec.BlockSpec{TypeName: pick(b.BlockValue.GetName()), Required: b.BlockValue.GetRequired(), Nested: nested}, nil
	case *hclspecpb.Spec_Default:
		p, err := convert(b.Default.GetPrimary(), name)
		if err != nil {
			return nil, err
		}
		d, err := convert(b.Default.GetDefault(), name)
		if err != nil {
			return nil, err
		}
		return &hcldec.DefaultSpec{Primary: p, Default: d}, nil
	case *hclspecpb.Spec_Literal:
		expr, diags := hclsyntax.ParseExpression([]byte(b.Literal.GetValue()), "literal", hcl.InitialPos)
		if diags.HasErrors() {
			return nil, diags
		}
		v, diags := expr.Value(nil)
		if diags.HasErrors() {
			return nil, diags
		}
		return &hcldec.LiteralSpec{Value: v}, nil
	}
	return nil, fmt.Errorf("spec kind %T not supported by this test helper", s.Block)
}

// EncodeConfig decodes body (the inside of a plugin's config {} block, HCL
// native syntax) against spec and returns the msgpack bytes Nomad sends in
// SetConfigRequest.msgpack_config.
func EncodeConfig(spec *hclspecpb.Spec, body string) ([]byte, error) {
	hs, err := Convert(spec)
	if err != nil {
		return nil, err
	}
	f, diags := hclsyntax.ParseConfig([]byte(body), "config.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	val, diags := hcldec.Decode(f.Body, hs, nil)
	if diags.HasErrors() {
		return nil, diags
	}
	return ctymsgpack.Marshal(val, val.Type())
}

// ValidateFingerprint applies the Nomad client's checks to a fingerprint;
// Nomad drops all of a plugin's devices and stops it when they fail.
func ValidateFingerprint(resp *devicepb.FingerprintResponse) error {
	for i, g := range resp.GetDeviceGroup() {
		if g.GetVendor() == "" || g.GetDeviceType() == "" || g.GetDeviceName() == "" {
			return fmt.Errorf("group %d: vendor, type and name must be set: %q %q %q", i, g.GetVendor(), g.GetDeviceType(), g.GetDeviceName())
		}
		for _, d := range g.GetDevices() {
			if d.GetID() == "" {
				return fmt.Errorf("group %q: device without ID", g.GetDeviceName())
			}
		}
		for k, a := range g.GetAttributes() {
			if a.GetValue() == nil {
				return fmt.Errorf("group %q attribute %q: no value", g.GetDeviceName(), k)
			}
			if u := a.GetUnit(); u != "" {
				if !Units[u] {
					return fmt.Errorf("group %q attribute %q: unit %q not in Nomad's unit table", g.GetDeviceName(), k, u)
				}
				switch a.GetValue().(type) {
				case *structspb.Attribute_IntVal, *structspb.Attribute_FloatVal:
				default:
					return fmt.Errorf("group %q attribute %q: unit %q on a non-numeric value", g.GetDeviceName(), k, u)
				}
			}
		}
	}
	return nil
}
