//go:build serveprof

package main

import (
	"os"
	"runtime/pprof"
	"strconv"
	"time"
)

func init() {
	p := os.Getenv("DOS_CPUPROF")
	if p == "" {
		return
	}
	f, _ := os.Create(p + "." + strconv.Itoa(os.Getpid()))
	pprof.StartCPUProfile(f)
	time.AfterFunc(12*time.Second, func() { pprof.StopCPUProfile(); f.Close() })
}
