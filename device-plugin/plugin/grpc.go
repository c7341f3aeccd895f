package plugin

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gputide/gputide/device-plugin/proto/basepb"
	"github.com/gputide/gputide/device-plugin/proto/devicepb"
)

// Handshake is Nomad's plugin handshake: protocol version 2 (gRPC plugins,
// Nomad 0.9 and later) and Nomad's magic cookie.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  2,
	MagicCookieKey:   "NOMAD_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255",
}

// Plugin set keys: Nomad dispenses "base" to fingerprint the binary and
// "device" for the running instance.
const (
	PluginSetBase   = "base"
	PluginSetDevice = "device"
)

// BaseGRPC is the go-plugin glue of the BasePlugin service. On the client
// side Dispense returns a basepb.BasePluginClient.
type BaseGRPC struct {
	goplugin.NetRPCUnsupportedPlugin
	// Impl is the plugin served; nil on the client side.
	Impl *Plugin
}

// GRPCServer registers the BasePlugin service.
func (b *BaseGRPC) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	basepb.RegisterBasePluginServer(s, &baseServer{p: b.Impl})
	return nil
}

// GRPCClient returns a basepb.BasePluginClient.
func (b *BaseGRPC) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return basepb.NewBasePluginClient(c), nil
}

// DeviceGRPC is the go-plugin glue of the DevicePlugin service. On the
// client side Dispense returns a devicepb.DevicePluginClient.
type DeviceGRPC struct {
	goplugin.NetRPCUnsupportedPlugin
	// Impl is the plugin served; nil on the client side.
	Impl *Plugin
}

// GRPCServer registers the DevicePlugin service.
func (d *DeviceGRPC) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	devicepb.RegisterDevicePluginServer(s, &deviceServer{p: d.Impl})
	return nil
}

// GRPCClient returns a devicepb.DevicePluginClient.
func (d *DeviceGRPC) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return devicepb.NewDevicePluginClient(c), nil
}

// PluginSet is the set to serve p with, or (p nil) to dispense clients from.
func PluginSet(p *Plugin) goplugin.PluginSet {
	return goplugin.PluginSet{
		PluginSetBase:   &BaseGRPC{Impl: p},
		PluginSetDevice: &DeviceGRPC{Impl: p},
	}
}

// Serve runs p as a Nomad device plugin on this process's stdio until Nomad
// kills it, logging hclog JSON to stderr (Nomad re-logs those lines).
func Serve(p *Plugin, log hclog.Logger) {
	defer p.Shutdown()
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         PluginSet(p),
		GRPCServer:      goplugin.DefaultGRPCServer,
		Logger:          log,
	})
}

// NewLogger is the plugin process's logger: JSON on stderr at trace level,
// as Nomad's own plugins log.
func NewLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "gputide",
		Level:      hclog.Trace,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

type baseServer struct {
	basepb.UnimplementedBasePluginServer
	p *Plugin
}

// PluginInfo serves BasePlugin.PluginInfo.
func (s *baseServer) PluginInfo(context.Context, *basepb.PluginInfoRequest) (*basepb.PluginInfoResponse, error) {
	return s.p.PluginInfo(), nil
}

// ConfigSchema serves BasePlugin.ConfigSchema.
func (s *baseServer) ConfigSchema(context.Context, *basepb.ConfigSchemaRequest) (*basepb.ConfigSchemaResponse, error) {
	return &basepb.ConfigSchemaResponse{Spec: s.p.ConfigSchema()}, nil
}

// SetConfig serves BasePlugin.SetConfig; a bad config is InvalidArgument.
func (s *baseServer) SetConfig(_ context.Context, req *basepb.SetConfigRequest) (*basepb.SetConfigResponse, error) {
	if err := s.p.SetConfig(req.GetMsgpackConfig()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &basepb.SetConfigResponse{}, nil
}

type deviceServer struct {
	devicepb.UnimplementedDevicePluginServer
	p *Plugin
}

// Fingerprint serves DevicePlugin.Fingerprint (see Plugin.Fingerprint).
func (s *deviceServer) Fingerprint(_ *devicepb.FingerprintRequest, stream grpc.ServerStreamingServer[devicepb.FingerprintResponse]) error {
	return grpcError(s.p.Fingerprint(stream.Context(), stream.Send))
}

// Reserve serves DevicePlugin.Reserve (see Plugin.Reserve).
func (s *deviceServer) Reserve(ctx context.Context, req *devicepb.ReserveRequest) (*devicepb.ReserveResponse, error) {
	if len(req.GetDeviceIds()) > 0 && !s.p.config().Enabled {
		return nil, grpcError(ErrDisabled)
	}
	res, err := s.p.Reserve(ctx, req.GetDeviceIds())
	if err != nil {
		return nil, grpcError(err)
	}
	return &devicepb.ReserveResponse{ContainerRes: res}, nil
}

// Stats serves DevicePlugin.Stats (see Plugin.Stats).
func (s *deviceServer) Stats(req *devicepb.StatsRequest, stream grpc.ServerStreamingServer[devicepb.StatsResponse]) error {
	return grpcError(s.p.Stats(stream.Context(), req.GetCollectionInterval().AsDuration(), stream.Send))
}

// grpcError gives plugin errors a gRPC status. The disabled error is
// FailedPrecondition (not Unavailable/Canceled, which Nomad takes for a
// crashed plugin and relaunches).
func grpcError(err error) error {
	switch {
	case err == nil:
		return nil
	case err == ErrDisabled:
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unknown, err.Error())
}
