package main

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// transfer: a spinning leader waits for every goroutine to acknowledge its round, then
// names a random next leader; the others yield (-e 0) or park (-e 1) in between. With
// -e 1 the leader wakes the others at the start of its round (see ../c/transfer.c).
const stallLimit = 5 * time.Second

type transferMember struct {
	seen atomic.Int64
	wake semaphore
}

func init() {
	var members []transferMember
	var exhaust bool
	var round atomic.Int64
	var leader atomic.Int64
	var done atomic.Bool
	wakeOthers := func(me int) {
		for i := range members {
			if i != me {
				members[i].wake.V()
			}
		}
	}
	lead := func(me int, rng *uint64) {
		r := round.Load() + 1
		round.Store(r)
		members[me].seen.Store(r)
		if mustStop(me) {
			done.Store(true)
			if exhaust {
				wakeOthers(me)
			}
			return
		}
		if exhaust {
			wakeOthers(me)
		}
		start := time.Now()
		for i := range members {
			for spins := 0; members[i].seen.Load() != r; spins++ {
				if spins%1024 == 0 && time.Since(start) > stallLimit {
					failure("round %d stalled: thread %d did not acknowledge within %.0f s", r, i, stallLimit.Seconds())
				}
			}
		}
		next := int(random(rng) % uint64(len(members)))
		leader.Store(int64(next))
		count(me)
		if exhaust && next != me {
			members[next].wake.V()
		}
	}
	register(&benchmark{
		name: "transfer", extraFlags: "e", defaultThreadsPerProc: 1,
		setup: func(o *options) {
			members = make([]transferMember, o.threads)
			exhaust = o.exhaust == 1
		},
		threadMain: func(index int) {
			rng := seed(index)
			for !done.Load() {
				if leader.Load() == int64(index) {
					lead(index, &rng)
				} else {
					members[index].seen.Store(round.Load())
					if exhaust {
						members[index].wake.P(&parkers[index])
					} else {
						runtime.Gosched()
					}
				}
			}
		},
		drain: func() {
			for i := range members {
				members[i].wake.V()
			}
		},
		extraJSON: func() string {
			return fmt.Sprintf(", \"exhaust\": %v, \"rounds\": %d", exhaust, round.Load())
		},
	})
}
