package main

import "fmt"

// cycle: rings of r goroutines; each waits on its own semaphore, then posts the next
// one's. See ../c/cycle.c for why the stop is read while holding the token.
func init() {
	var sems []semaphore
	var ring, rings int
	register(&benchmark{
		name: "cycle", extraFlags: "r", defaultThreadsPerProc: 500,
		validate: func(o *options) {
			if o.threads%o.ring != 0 {
				usageError("-t %d is not a multiple of the ring size -r %d", o.threads, o.ring)
			}
		},
		setup: func(o *options) {
			ring, rings = o.ring, o.threads/o.ring
			sems = newSemaphores(o.threads)
		},
		threadMain: func(index int) {
			first := index - index%ring
			next := &sems[first+(index-first+1)%ring]
			for {
				sems[index].P(&parkers[index])
				stopping := mustStop(index)
				next.V()
				count(index)
				if stopping {
					return
				}
			}
		},
		started: func() {
			for r := 0; r < rings; r++ {
				sems[r*ring].V()
			}
		},
		drain:     func() {},
		extraJSON: func() string { return fmt.Sprintf(", \"ring_size\": %d, \"rings\": %d", ring, rings) },
	})
}
