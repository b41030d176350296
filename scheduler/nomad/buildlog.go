package nomad

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/scheduler"
)

// maxLogLine is the longest partial line a build log holds before it
// hands it on as a line of its own.
const maxLogLine = 64 << 10

// buildLog follows a build task's stdout and stderr (Nomad's logs API with
// follow=true, one stream each) into the build request's log as lines,
// while the build runs; finish reads what the streams had not delivered
// when the build ended, from the byte offsets reached, so that no line is
// lost or repeated.
type buildLog struct {
	r       *Runtime
	allocID string
	sink    scheduler.LogSink
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	read    map[string]int64  // bytes handed on, per stream
	partial map[string][]byte // the unfinished last line, per stream
}

// followBuild starts following the build's output; sink may be nil (then
// nothing is read).
func (r *Runtime) followBuild(ctx context.Context, allocID string, sink scheduler.LogSink) *buildLog {
	b := &buildLog{r: r, allocID: allocID, sink: sink, read: map[string]int64{}, partial: map[string][]byte{}}
	fctx, cancel := context.WithCancel(ctx)
	b.cancel = cancel
	if sink == nil {
		return b
	}
	for _, stream := range []string{scheduler.StreamStdout, scheduler.StreamStderr} {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.follow(fctx, stream)
		}()
	}
	return b
}

// follow reads one stream's frames until it ends or is cancelled; a
// stream that fails is left to finish.
func (b *buildLog) follow(ctx context.Context, stream string) {
	q := (&api.QueryOptions{Params: map[string]string{
		"task": buildGroup, "type": stream, "origin": "start", "offset": "0", "follow": "true",
	}}).WithContext(ctx)
	body, err := b.r.client.Raw().Response("/v1/client/fs/logs/"+b.allocID, q)
	if err != nil {
		return
	}
	defer body.Close()
	dec := json.NewDecoder(body)
	for {
		var f api.StreamFrame
		if err := dec.Decode(&f); err != nil {
			return
		}
		if len(f.Data) > 0 {
			b.add(stream, f.Data)
		}
	}
}

// add hands on the whole lines of data and keeps the rest.
func (b *buildLog) add(stream string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.read[stream] += int64(len(data))
	buf := append(b.partial[stream], data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		b.sink(stream, string(bytes.TrimSuffix(buf[:i], []byte("\r"))))
		buf = buf[i+1:]
	}
	if len(buf) > maxLogLine {
		b.sink(stream, string(buf))
		buf = nil
	}
	b.partial[stream] = append([]byte(nil), buf...)
}

// finish stops following, reads each stream from where it got to (at
// most the runtime's log cap) and hands on the last unfinished lines.
func (b *buildLog) finish(ctx context.Context) {
	b.cancel()
	b.wg.Wait()
	if b.sink == nil {
		return
	}
	for _, stream := range []string{scheduler.StreamStdout, scheduler.StreamStderr} {
		b.mu.Lock()
		offset := b.read[stream]
		b.mu.Unlock()
		q := (&api.QueryOptions{Params: map[string]string{
			"task": buildGroup, "type": stream, "origin": "start", "offset": strconv.FormatInt(offset, 10), "plain": "true",
		}}).WithContext(ctx)
		body, err := b.r.client.Raw().Response("/v1/client/fs/logs/"+b.allocID, q)
		if err == nil {
			rest, _ := io.ReadAll(io.LimitReader(body, b.r.cfg.LogCapBytes))
			body.Close()
			b.add(stream, rest)
		}
		b.mu.Lock()
		if last := b.partial[stream]; len(last) > 0 {
			b.sink(stream, string(last))
			b.partial[stream] = nil
		}
		b.mu.Unlock()
	}
}
