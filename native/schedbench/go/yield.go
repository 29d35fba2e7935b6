package main

import "runtime"

// yield: every goroutine yields in a loop.
func init() {
	register(&benchmark{
		name: "yield", extraFlags: "", defaultThreadsPerProc: 100,
		setup: func(o *options) {},
		threadMain: func(index int) {
			for {
				runtime.Gosched()
				count(index)
				if mustStop(index) {
					return
				}
			}
		},
		drain: func() {},
	})
}
