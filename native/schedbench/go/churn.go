package main

import (
	"fmt"
	"runtime"
	"sync/atomic"
)

// churn: V then P on a random counting semaphore; the first `spots` goroutines start
// by waiting, so that V's wake waiters and P's block (see ../c/churn.c).
func init() {
	var spots []semaphore
	var waitersReady atomic.Int64
	spotCount := func(o *options) int {
		if o.spots > 0 {
			return o.spots
		}
		return o.threads / 2
	}
	register(&benchmark{
		name: "churn", extraFlags: "s", defaultThreadsPerProc: 100,
		validate: func(o *options) {
			if n := spotCount(o); n < 1 || o.threads < n+o.procs {
				usageError("-t %d must be at least spots (%d) + processors (%d)", o.threads, n, o.procs)
			}
		},
		setup: func(o *options) { spots = newSemaphores(spotCount(o)) },
		threadMain: func(index int) {
			rng := seed(index)
			skipPost := index < len(spots)
			spot := &spots[index%len(spots)]
			// The others start once every waiter is about to wait (see ../c/churn.c).
			if skipPost {
				waitersReady.Add(1)
			} else {
				for waitersReady.Load() < int64(len(spots)) {
					runtime.Gosched()
				}
			}
			for {
				if !skipPost {
					spot.V()
				}
				skipPost = false
				spot.P(&parkers[index])
				count(index)
				if mustStop(index) {
					return
				}
				spot = &spots[random(&rng)%uint64(len(spots))]
			}
		},
		drain: func() {
			for i := range spots {
				spots[i].V()
			}
		},
		extraJSON: func() string { return fmt.Sprintf(", \"spots\": %d", len(spots)) },
	})
}
