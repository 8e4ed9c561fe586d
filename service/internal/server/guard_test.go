package server

import (
	"bytes"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"

	"golang.org/x/net/http2"
)

// frameRec is a frame header as frameScanner reports it.
type frameRec struct {
	typ, flags byte
	id         uint32
	length     int
}

// clientBytes returns a client's side of an HTTP/2 connection: the preface
// and frames of many kinds and sizes, and their headers.
func clientBytes(t testing.TB) ([]byte, []frameRec) {
	var buf bytes.Buffer
	buf.WriteString(http2Preface)
	fr := http2.NewFramer(&buf, nil)
	var want []frameRec
	add := func(typ http2.FrameType, flags http2.Flags, id uint32, length int) {
		want = append(want, frameRec{byte(typ), byte(flags), id, length})
	}
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	add(http2.FrameSettings, 0, 0, 6)
	for i := range 40 {
		id := uint32(2*i + 1)
		block := bytes.Repeat([]byte{0x82}, i*7%50+1)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: i%5 != 0, EndStream: i%7 == 0})
		add(http2.FrameHeaders, func() http2.Flags {
			f := http2.Flags(0)
			if i%5 != 0 {
				f |= http2.FlagHeadersEndHeaders
			}
			if i%7 == 0 {
				f |= http2.FlagHeadersEndStream
			}
			return f
		}(), id, len(block))
		if i%5 == 0 {
			fr.WriteContinuation(id, true, []byte{0x83})
			add(http2.FrameContinuation, http2.FlagContinuationEndHeaders, id, 1)
		}
		for j := range i % 4 {
			n := []int{0, 1, 16384, 300}[j]
			fr.WriteData(id, j == i%4-1, make([]byte, n))
			f := http2.Flags(0)
			if j == i%4-1 {
				f = http2.FlagDataEndStream
			}
			add(http2.FrameData, f, id, n)
		}
		if i%9 == 0 {
			fr.WriteRSTStream(id, http2.ErrCodeCancel)
			add(http2.FrameRSTStream, 0, id, 4)
		}
		if i%11 == 0 {
			fr.WritePing(false, [8]byte{})
			add(http2.FramePing, 0, 0, 8)
			fr.WriteWindowUpdate(0, 1000)
			add(http2.FrameWindowUpdate, 0, 0, 4)
		}
	}
	return buf.Bytes(), want
}

// frameScanner finds every frame header wherever the reads split them.
func TestFrameScanner(t *testing.T) {
	t.Parallel()
	data, want := clientBytes(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		s := frameScanner{skip: len(http2Preface)}
		var got []frameRec
		for b := data; len(b) > 0; {
			n := 1 + rng.IntN(min(len(b), []int{1, 9, 100, 20000}[round%4]))
			s.scan(b[:n], func(typ, flags byte, id uint32, length int) bool {
				got = append(got, frameRec{typ, flags, id, length})
				return false
			})
			b = b[n:]
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: %d frames, want %d", round, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("round %d, frame %d: %+v, want %+v", round, i, got[i], want[i])
			}
		}
	}
	// A frame func that returns true stops the scan.
	s := frameScanner{skip: len(http2Preface)}
	calls := 0
	if !s.scan(data, func(byte, byte, uint32, int) bool { calls++; return calls == 3 }) || calls != 3 {
		t.Fatalf("scan went on after true: %d calls", calls)
	}
}

// nopConn is a net.Conn that reads from a reader and discards writes.
type nopConn struct {
	net.Conn
	r io.Reader
}

func (c *nopConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *nopConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *nopConn) Close() error                { return nil }

// BenchmarkGuard is what the guard costs per request: reading the client's
// HEADERS and DATA (a small request) and writing the server's HEADERS,
// DATA and trailers.
func BenchmarkGuard(b *testing.B) {
	var in, out bytes.Buffer
	fin, fout := http2.NewFramer(&in, nil), http2.NewFramer(&out, nil)
	fin.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 20), EndHeaders: true})
	fin.WriteData(1, true, make([]byte, 40))
	fout.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 5), EndHeaders: true})
	fout.WriteData(1, false, make([]byte, 30))
	fout.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 10), EndHeaders: true, EndStream: true})
	g := newConnGuard(10, 1<<30, slog.New(slog.DiscardHandler))
	rd := bytes.NewReader(nil)
	c := &guardedConn{Conn: &nopConn{r: rd}, g: g, streams: map[uint32]int64{}}
	buf := make([]byte, 32<<10)
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(in.Bytes())
		c.Read(buf)
		c.Write(out.Bytes())
	}
	if g.pending.Load() != 0 {
		b.Fatalf("pending %d after every stream ended", g.pending.Load())
	}
}
