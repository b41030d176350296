package scheduler

import "testing"

// TestDecideDiskSequences plays readings one after another through
// decideDisk, as the leader's memory carries them, and checks what each
// one calls for: a warning once per crossing (near, then over), the stop
// at the loop's second reading over in a row, and nothing ever without a
// limit.
func TestDecideDiskSequences(t *testing.T) {
	const limit = 1000
	type step struct {
		used      int64
		scheduled bool   // the loop's reading (else GET …/usage's)
		job       string // "" is job-1
		want      string // "", "near", "over" (warnings) or "stop"
	}
	loop := func(used int64, want string) step { return step{used: used, scheduled: true, want: want} }
	get := func(used int64, want string) step { return step{used: used, want: want} }
	for _, c := range []struct {
		name  string
		limit int64
		steps []step
	}{
		{"under says nothing", limit, []step{loop(0, ""), loop(899, ""), loop(500, "")}},
		{"near warns once", limit, []step{loop(900, "near"), loop(950, ""), loop(1000, "")}},
		{"at the limit is near, not over", limit, []step{loop(1000, "near"), loop(1000, "")}},
		{"over once warns", limit, []step{loop(1001, "over")}},
		{"near, then over, then stopped", limit, []step{loop(950, "near"), loop(1200, "over"), loop(1300, "stop")}},
		{"over twice in a row stops without a second warning", limit, []step{loop(2000, "over"), loop(2000, "stop")}},
		{"back under resets: the next crossing warns again", limit, []step{
			loop(950, "near"), loop(1200, "over"), loop(100, ""), loop(950, "near"), loop(1200, "over"), loop(1200, "stop")}},
		{"a near reading breaks the row", limit, []step{loop(1200, "over"), loop(950, ""), loop(1200, "over"), loop(1200, "stop")}},
		{"no limit is never anything", 0, []step{loop(5, ""), loop(1<<40, ""), loop(1<<40, ""), get(1<<40, "")}},
		{"GET warns at once", limit, []step{get(950, "near"), get(1100, "over"), loop(1100, ""), loop(1100, "stop")}},
		{"GET never stops nor counts towards the row", limit, []step{
			loop(1100, "over"), get(1100, ""), get(1100, ""), loop(1100, "stop")}},
		{"GET under breaks the row", limit, []step{loop(1100, "over"), get(10, ""), loop(1100, "over"), loop(1100, "stop")}},
		{"a new job starts afresh", limit, []step{
			loop(1100, "over"), {used: 1100, scheduled: true, job: "job-2", want: "over"}, {used: 1100, scheduled: true, job: "job-2", want: "stop"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m diskMemory
			for i, st := range c.steps {
				job := st.job
				if job == "" {
					job = "job-1"
				}
				var v diskVerdict
				v, m = decideDisk(diskReading{JobID: job, Workload: "web", Used: st.used, Limit: c.limit}, m, st.scheduled)
				got := ""
				switch {
				case v.Stop && v.Warn:
					got = "stop and warn"
				case v.Stop:
					got = "stop"
				case v.Warn && v.Over:
					got = "over"
				case v.Warn:
					got = "near"
				}
				if got != st.want {
					t.Fatalf("reading %d (%d of %d, scheduled %v): %q, want %q (memory %+v)", i+1, st.used, c.limit, st.scheduled, got, st.want, m)
				}
			}
		})
	}
}

// TestDiskLevelAndWorstWorkload: the near threshold is DiskNearPercent of
// the limit, over is past the limit; an app's reading is its workload with
// the largest share of its own limit, workloads without a limit left out,
// and a workload the runtime did not report reading as 0.
func TestDiskLevelAndWorstWorkload(t *testing.T) {
	for _, c := range []struct {
		used, limit int64
		want        diskLevel
	}{
		{0, 0, diskUnder}, {1 << 50, 0, diskUnder}, {-1, 100, diskUnder},
		{89, 100, diskUnder}, {90, 100, diskNear}, {100, 100, diskNear}, {101, 100, diskOver},
		{9 << 40, 10 << 40, diskNear}, {10<<40 + 1, 10 << 40, diskOver},
	} {
		if got := diskLevelOf(c.used, c.limit); got != c.want {
			t.Errorf("diskLevelOf(%d, %d) = %d, want %d", c.used, c.limit, got, c.want)
		}
	}
	for _, c := range []struct {
		name   string
		limits map[string]int64
		used   map[string]int64
		want   diskReading
	}{
		{"none", nil, map[string]int64{"web": 5}, diskReading{JobID: "j"}},
		{"largest share, not largest use", map[string]int64{"web": 1000, "worker": 100}, map[string]int64{"web": 800, "worker": 95},
			diskReading{JobID: "j", Workload: "worker", Used: 95, Limit: 100}},
		{"unreported reads as 0", map[string]int64{"web": 1000}, map[string]int64{"other": 5000},
			diskReading{JobID: "j", Workload: "web", Used: 0, Limit: 1000}},
		{"equal shares: by name", map[string]int64{"b": 10, "a": 10}, map[string]int64{"a": 5, "b": 5},
			diskReading{JobID: "j", Workload: "a", Used: 5, Limit: 10}},
		{"a zero limit is none", map[string]int64{"web": 0, "db": 50}, map[string]int64{"web": 1 << 30, "db": 1},
			diskReading{JobID: "j", Workload: "db", Used: 1, Limit: 50}},
	} {
		if got := worstDisk("j", c.limits, c.used); got != c.want {
			t.Errorf("%s: worstDisk = %+v, want %+v", c.name, got, c.want)
		}
	}
}
