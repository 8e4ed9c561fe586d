package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultStatsFlushInterval is Options.StatsFlushInterval's default, as
// envoyproxy/ratelimit's STATS_FLUSH_INTERVAL.
const DefaultStatsFlushInterval = 10 * time.Second

// statsdTimeout bounds a connection to statsd and a flush's write.
const statsdTimeout = 5 * time.Second

// statsd sends envoyproxy/ratelimit's per-rule counters to a statsd server
// over TCP, as its statsd sink does: every interval, the hits of each
// counter since the last flush, for the counters that moved. Hits not sent
// (statsd away) are sent with the next flush that succeeds.
type statsd struct {
	addr  string
	tags  string // ".__key=value" for each tag, sorted by key
	every time.Duration
	stats *envoyStats
	log   *slog.Logger

	mu   sync.Mutex
	conn net.Conn
	gone []*envoySeries // dropped series with hits still to send
	logs throttle
}

// run flushes every interval until ctx is done, then once more.
func (d *statsd) run(ctx context.Context) {
	t := time.NewTicker(d.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			d.flushLogged()
			d.mu.Lock()
			if d.conn != nil {
				d.conn.Close()
			}
			d.mu.Unlock()
			return
		case <-t.C:
			d.flushLogged()
		}
	}
}

func (d *statsd) flushLogged() {
	if err := d.flush(); err != nil {
		if ok, held := d.logs.allow(); ok {
			d.log.Warn("statsd: counters not sent; they are kept for the next flush", "addr", d.addr, "err", err, "held_back", held)
		}
	}
}

// flush sends what moved since the last flush that succeeded.
func (d *statsd) flush() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.mu.Lock()
	d.gone = append(d.gone, d.stats.gone...)
	d.stats.gone = nil
	series := make([]*envoySeries, 0, len(d.stats.series)+len(d.gone))
	for _, s := range d.stats.series {
		series = append(series, s)
	}
	d.stats.mu.Unlock()
	series = append(series, d.gone...)

	var buf bytes.Buffer
	var now [][len(envoyStatNames)]uint64
	for _, s := range series {
		var v [len(envoyStatNames)]uint64
		for i := range envoyStatNames {
			v[i] = s.hits[i].Load()
			if delta := v[i] - s.sent[i]; delta != 0 {
				fmt.Fprintf(&buf, "%s%s.%s%s:%s|c\n", envoyStatPrefix, s.name, envoyStatNames[i], d.tags, strconv.FormatUint(delta, 10))
			}
		}
		now = append(now, v)
	}
	if buf.Len() > 0 {
		if err := d.write(buf.Bytes()); err != nil {
			return err
		}
	}
	for i, s := range series {
		s.sent = now[i]
	}
	d.gone = d.gone[:0]
	return nil
}

// write writes b on the connection, made if there is none; a failed
// write closes it, for the next flush to make another.
func (d *statsd) write(b []byte) error {
	if d.conn == nil {
		c, err := net.DialTimeout("tcp", d.addr, statsdTimeout)
		if err != nil {
			return err
		}
		d.conn = c
	}
	d.conn.SetWriteDeadline(time.Now().Add(statsdTimeout))
	if _, err := d.conn.Write(b); err != nil {
		d.conn.Close()
		d.conn = nil
		return err
	}
	return nil
}

// statsdTags returns tags as envoyproxy/ratelimit's stats library ends a
// name with them: ".__key=value" sorted by key, '.', ':' and '|' in values
// replaced by '_', pairs with an empty key or value left out.
func statsdTags(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k, v := range tags {
		if k != "" && v != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	r := strings.NewReplacer(".", "_", ":", "_", "|", "_")
	for _, k := range keys {
		b.WriteString(".__" + k + "=" + r.Replace(tags[k]))
	}
	return b.String()
}
