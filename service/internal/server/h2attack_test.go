package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Attacker is a hostile gRPC client written at the HTTP/2 frame level:
// it opens ShouldRateLimit streams that declare a request message and send
// it only in part, so that the server holds what arrived while it waits for
// the rest. It follows the server's flow control, as a client must for the
// server to read what it sends.
type h2Attacker struct {
	t    testing.TB
	conn net.Conn
	bw   *bufio.Writer
	fr   *http2.Framer // writes to bw; guarded by wmu
	wmu  sync.Mutex
	hbuf bytes.Buffer
	enc  *hpack.Encoder

	mu       sync.Mutex
	cond     *sync.Cond
	connWin  int64 // what the server lets us send on the connection
	initWin  int64 // the server's SETTINGS_INITIAL_WINDOW_SIZE
	settings map[http2.SettingID]uint32
	winOf    map[uint32]int64 // what the server lets us send on each stream
	reset    map[uint32]bool  // streams the server reset
	goAway   bool
	readErr  error // set once the server's side of the connection ended
	nextID   uint32

	// paced sends every DATA frame in a write of its own, so that the
	// server reads each before the next arrives (gRPC then keeps each as a
	// buffer of its own instead of joining those that queued up).
	paced bool
}

// dialH2 connects to the gRPC server at addr, sends the client preface and
// follows the server's frames in a goroutine.
func dialH2(t testing.TB, addr string) *h2Attacker {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	a := &h2Attacker{t: t, conn: c, bw: bufio.NewWriterSize(c, 64<<10), connWin: 65535, initWin: 65535,
		settings: map[http2.SettingID]uint32{}, winOf: map[uint32]int64{}, reset: map[uint32]bool{}, nextID: 1}
	a.cond = sync.NewCond(&a.mu)
	a.fr = http2.NewFramer(a.bw, nil)
	a.enc = hpack.NewEncoder(&a.hbuf)
	a.write(func() error {
		if _, err := io.WriteString(a.bw, http2.ClientPreface); err != nil {
			return err
		}
		return a.fr.WriteSettings()
	})
	a.flush()
	go a.read()
	return a
}

// read follows the server's frames: settings, window updates, resets, pings.
func (a *h2Attacker) read() {
	fr := http2.NewFramer(nil, a.conn)
	for {
		f, err := fr.ReadFrame()
		a.mu.Lock()
		if err != nil {
			a.readErr = err
			a.cond.Broadcast()
			a.mu.Unlock()
			return
		}
		var reply func() error
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				break
			}
			f.ForeachSetting(func(s http2.Setting) error {
				a.settings[s.ID] = s.Val
				if s.ID == http2.SettingInitialWindowSize {
					for id := range a.winOf {
						a.winOf[id] += int64(s.Val) - a.initWin
					}
					a.initWin = int64(s.Val)
				}
				return nil
			})
			reply = a.fr.WriteSettingsAck
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				a.connWin += int64(f.Increment)
			} else if _, ok := a.winOf[f.StreamID]; ok {
				a.winOf[f.StreamID] += int64(f.Increment)
			}
		case *http2.RSTStreamFrame:
			a.reset[f.StreamID] = true
		case *http2.HeadersFrame:
			if f.StreamEnded() { // an early answer (an error status): the stream is over
				a.reset[f.StreamID] = true
			}
		case *http2.GoAwayFrame:
			a.goAway = true
		case *http2.PingFrame:
			if !f.IsAck() {
				data := f.Data
				reply = func() error { return a.fr.WritePing(true, data) }
			}
		}
		a.cond.Broadcast()
		a.mu.Unlock()
		if reply != nil {
			a.write(reply)
			a.flush()
		}
	}
}

// write runs one write of the framer, which is not safe for concurrent
// use, into the buffer; flush sends the buffer.
func (a *h2Attacker) write(w func() error) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return w()
}

func (a *h2Attacker) flush() error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return a.bw.Flush()
}

// open starts a ShouldRateLimit stream whose message declares length bytes
// and returns its id.
func (a *h2Attacker) open(length int) uint32 {
	id := a.headers(nil)
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(length))
	a.send(id, prefix[:], false, time.Second)
	return id
}

// headers starts a ShouldRateLimit stream with the extra header fields and
// returns its id.
func (a *h2Attacker) headers(extra []hpack.HeaderField) uint32 {
	a.mu.Lock()
	id := a.nextID
	a.nextID += 2
	a.winOf[id] = a.initWin
	a.mu.Unlock()
	a.write(func() error {
		a.hbuf.Reset()
		for _, f := range []hpack.HeaderField{
			{Name: ":method", Value: "POST"},
			{Name: ":scheme", Value: "http"},
			{Name: ":path", Value: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
			{Name: ":authority", Value: "127.0.0.1"},
			{Name: "content-type", Value: "application/grpc"},
			{Name: "te", Value: "trailers"},
		} {
			a.enc.WriteField(f)
		}
		for _, f := range extra {
			a.enc.WriteField(f)
		}
		return a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: a.hbuf.Bytes(), EndHeaders: true})
	})
	return id
}

// request sends a whole gRPC message on stream id, ending the stream.
func (a *h2Attacker) request(id uint32, msg []byte) bool {
	body := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	copy(body[5:], msg)
	return a.send(id, body, true, time.Second)
}

// send writes data on stream id in one DATA frame, ending the stream if
// end, as soon as flow control lets it, and reports whether it did before
// wait ran out, the stream was reset or the connection ended.
func (a *h2Attacker) send(id uint32, data []byte, end bool, wait time.Duration) bool {
	n := int64(len(data))
	a.mu.Lock()
	if !a.reset[id] && a.readErr == nil && (a.connWin < n || a.winOf[id] < n) {
		// About to wait for the server: let it have what is buffered.
		a.mu.Unlock()
		a.flush()
		deadline := time.Now().Add(wait)
		timer := time.AfterFunc(wait, func() { a.mu.Lock(); a.cond.Broadcast(); a.mu.Unlock() })
		defer timer.Stop()
		a.mu.Lock()
		for !a.reset[id] && a.readErr == nil && (a.connWin < n || a.winOf[id] < n) {
			if time.Now().After(deadline) {
				a.mu.Unlock()
				return false
			}
			a.cond.Wait()
		}
	}
	if a.reset[id] || a.readErr != nil {
		a.mu.Unlock()
		return false
	}
	a.connWin -= n
	a.winOf[id] -= n
	a.mu.Unlock()
	if err := a.write(func() error { return a.fr.WriteData(id, end, data) }); err != nil {
		return false
	}
	return !a.paced || a.flush() == nil
}

// fill sends up to n bytes on stream id in DATA frames of frame bytes, as
// flow control lets it, and returns how many it sent.
func (a *h2Attacker) fill(id uint32, n, frame int, wait time.Duration) int {
	buf := make([]byte, frame)
	sent := 0
	for sent < n {
		k := min(frame, n-sent)
		if !a.send(id, buf[:k], false, wait) {
			break
		}
		sent += k
	}
	a.flush()
	return sent
}

// isReset reports whether the server reset stream id or answered it.
func (a *h2Attacker) isReset(id uint32) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reset[id]
}

// gotGoAway reports whether the server sent GOAWAY.
func (a *h2Attacker) gotGoAway() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.goAway
}

// ended reports whether the server has closed the connection.
func (a *h2Attacker) ended() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.readErr != nil
}

// setting returns the server's value of a setting, and whether it sent one.
func (a *h2Attacker) setting(id http2.SettingID) (uint32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.settings[id]
	return v, ok
}
