package fanout

import "inventory/socket"

// pooledFlush is what one flush hands the writer pool: the framed bytes of
// each cohort, made once, and the jobs that write them.
//
// A cohort is the pooled members at the same place in the log whose
// messages are framed alike (the same operation id and subprotocol: the
// frame's suffix) and spelled alike (the same response keys). In a group that keeps up that is all of them, as a
// product page's viewers all subscribe with id "1": one flush frames its
// messages once for ten thousand sockets.
type pooledFlush struct {
	frames map[cohort]cohortFrames
	jobs   []*writeJob
}

type cohort struct {
	next   int64
	suffix string
	spell  int
}

type cohortFrames struct {
	b []byte // read only once made: every job of the cohort writes it
	n int    // messages in b
}

// add queues m's messages, the log from m.next to head, and moves m to head
// (g.mu held). m is busy until its job is done.
func (q *pooledFlush) add(g *group, m *member, head int64) {
	k := cohort{next: m.next, suffix: m.suffixKey, spell: m.spell}
	f, ok := q.frames[k]
	if !ok {
		batch := collect(nil, g.latest, nil, g.log[m.next-g.base:])
		for i := range batch {
			batch[i] = batch[i].respell(g, m.spell)
		}
		size := 0
		for _, e := range batch {
			size += len(e.payload) + len(m.prefix) + len(m.suffix) + 10 // 10: the longest frame header
		}
		b := make([]byte, 0, size)
		for _, e := range batch {
			b = socket.AppendTextFrame(b, m.prefix, e.payload, m.suffix)
		}
		f = cohortFrames{b: b, n: len(batch)}
		if q.frames == nil {
			q.frames = map[cohort]cohortFrames{}
		}
		q.frames[k] = f
	}
	if len(q.jobs) == 0 || len(q.jobs[len(q.jobs)-1].items) == writeChunk {
		q.jobs = append(q.jobs, &writeJob{g: g, items: make([]writeItem, 0, writeChunk)})
	}
	j := q.jobs[len(q.jobs)-1]
	m.busy.Store(true)
	m.next = head
	j.items = append(j.items, writeItem{m: m, frames: f.b, n: f.n, upto: head})
}

// collect appends to dst the messages of owed and then fresh that a member
// is to send: all of them, or in latest mode only the newest value of each
// key (a member that fell behind catches up with the latest, never with a
// backlog), in the order the keys first appear.
func collect(dst []entry, latest bool, owed, fresh []entry) []entry {
	if !latest || len(owed)+len(fresh) <= 1 {
		return append(append(dst, owed...), fresh...)
	}
	at := map[string]int{}
	for _, part := range [][]entry{owed, fresh} {
		for _, e := range part {
			if e.key == "" {
				dst = append(dst, e)
			} else if i, ok := at[e.key]; ok {
				dst[i] = e
			} else {
				at[e.key] = len(dst)
				dst = append(dst, e)
			}
		}
	}
	return dst
}
