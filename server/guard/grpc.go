package guard

import (
	"context"
	"sync"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// ServerOptions are the gRPC server options that install g: the codec (Codec) and the
// interceptors, recovery first so that it contains a panic anywhere behind it, then the
// refusal of messages that did not decode.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	codec := newCodec()
	contain := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		method, _ := grpc.Method(ctx)
		g.contained(method, p)
		return g.opts.Internal
	})
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec),
		grpc.ChainUnaryInterceptor(recovery.UnaryServerInterceptor(contain), g.unaryMalformed(codec)),
		grpc.ChainStreamInterceptor(recovery.StreamServerInterceptor(contain), g.streamMalformed(codec)),
	}
}

// unaryMalformed answers a call whose request did not decode with opts.Malformed, before its
// handler sees the (empty) message.
func (g *Guard) unaryMalformed(c *codec) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := c.undecoded(req); err != nil {
			return nil, g.opts.Malformed(ctx, info.FullMethod, err)
		}
		return handler(ctx, req)
	}
}

// streamMalformed answers a stream whose message did not decode with opts.Malformed: RecvMsg
// returns it to the handler, which ends the stream with it.
func (g *Guard) streamMalformed(c *codec) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &checkedStream{ServerStream: ss, codec: c, guard: g, method: info.FullMethod})
	}
}

// checkedStream is a server stream whose RecvMsg refuses a message that did not decode.
type checkedStream struct {
	grpc.ServerStream
	codec  *codec
	guard  *Guard
	method string
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := s.codec.undecoded(m); err != nil {
		return s.guard.opts.Malformed(s.Context(), s.method, err)
	}
	return nil
}

// codec is grpc-go's protobuf codec, except for a message that does not decode: grpc-go
// answers every codec error with code Internal (which clients retry), so the codec instead
// resets the message, keeps the error for it, and returns nil; the interceptors then answer
// the call with Options.Malformed. Every message a server decodes goes through an
// interceptor (the unary handler passes it to the chain; a stream's RecvMsg is checkedStream's),
// which takes the error back, so none is kept past its call.
type codec struct {
	proto encoding.CodecV2
	bad   sync.Map // message pointer → error
}

func newCodec() *codec { return &codec{proto: encoding.GetCodecV2("proto")} }

func (c *codec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.proto.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	proto.Reset(m)
	c.bad.Store(v, err)
	return nil
}

// Name is the proto codec's: the content subtype clients send.
func (c *codec) Name() string { return c.proto.Name() }

// undecoded returns, and forgets, the decoding error of message v; nil if it decoded.
func (c *codec) undecoded(v any) error {
	if err, ok := c.bad.LoadAndDelete(v); ok {
		return err.(error)
	}
	return nil
}
