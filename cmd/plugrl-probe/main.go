// Command plugrl-probe runs N probe envs of SPEC 8.1 on core/runner, so the
// protocol checker can verify what the library does with every action:
//
//	plugrl-conformance --probe --scenario all --client "plugrl-probe --url ws://127.0.0.1:8000 --envs 3"
//
// It exits 0 when the server stops the run (plugrl-server-stop) and 1 with
// the library's message on any other end.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/runner"
	"github.com/plugrl/libplugrl/core/wire"
)

func main() {
	url := flag.String("url", "ws://127.0.0.1:8000", "server URL")
	envs := flag.Int("envs", 3, "number of probe envs")
	apiKey := flag.String("api-key", "", "API key header")
	maxReconnects := flag.Int("max-reconnects", 5, "reconnect attempts after a lost connection")
	timeoutMS := flag.Int("timeout-ms", 30000, "timeout for connecting and for each reply, ms")
	textStrings := flag.Bool("text-strings", false, "send text as a msgpack string array instead of <U")
	flag.Parse()
	if err := run(*url, *envs, *apiKey, *maxReconnects, time.Duration(*timeoutMS)*time.Millisecond, *textStrings); err != nil {
		if client.KindOf(err) == client.KindStopped {
			fmt.Println("plugrl-probe: the server stopped the run")
			return
		}
		fmt.Fprintln(os.Stderr, "plugrl-probe:", err)
		os.Exit(1)
	}
}

// probe is SPEC 8.1's environment, batched: t counts steps, a echoes the
// last action applied.
type probe struct {
	n, d int
	t    []float64 // [n, 1]
	a    []float64 // [n, d]
}

func episodeLength(i int) float64 { return float64(3 + 2*(i%3)) }

func (p *probe) obs(text []string, textStrings bool) *wire.Observation {
	return &wire.Observation{
		States: []wire.NamedArray{
			{Name: "t", Array: wire.Array{DType: wire.Float64, Shape: []int{p.n, 1}, Data: wire.BytesOf(p.t)}},
			{Name: "a", Array: wire.Array{DType: wire.Float64, Shape: []int{p.n, p.d}, Data: wire.BytesOf(p.a)}},
		},
		Text:          text,
		TextAsStrings: textStrings,
	}
}

func run(url string, n int, apiKey string, maxReconnects int, timeout time.Duration, textStrings bool) error {
	c, err := client.Dial(context.Background(), client.Options{
		URL: url, APIKey: apiKey, MaxReconnects: maxReconnects,
		ConnectTimeout: timeout, MetadataTimeout: timeout, ReceiveTimeout: timeout,
		Logf: func(l client.Level, msg string) { fmt.Fprintln(os.Stderr, "plugrl-probe:", msg) },
	})
	if err != nil {
		return err
	}
	defer c.Close()
	d := 1
	if ad := c.Metadata().ActionDim; ad.Set && ad.Value > 0 {
		d = int(ad.Value)
	}
	r, err := runner.New(c, runner.Config{Envs: n})
	if err != nil {
		return err
	}
	p := &probe{n: n, d: d, t: make([]float64, n), a: make([]float64, n*d)}
	text := make([]string, n)
	for i := range text {
		text[i] = fmt.Sprintf("probe env %d", i)
	}
	actions := make([]float64, n*d)
	out := wire.Array{DType: wire.Float64, Data: wire.BytesOf(actions)}
	rewards := make([]float64, n)
	term := make([]bool, n)
	trunc := make([]bool, n)
	for {
		if err := r.Act(p.obs(text, textStrings), &out); err != nil {
			return err
		}
		width := len(actions) / n
		if width != d {
			return fmt.Errorf("the server's actions have %d values per step, metadata said %d", width, d)
		}
		for i := 0; i < n; i++ {
			p.t[i]++
			copy(p.a[i*d:(i+1)*d], actions[i*d:(i+1)*d])
			rewards[i] = 1
			term[i] = p.t[i] == episodeLength(i)
		}
		if err := r.Report(p.obs(text, textStrings), rewards, term, trunc, nil); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if term[i] {
				p.t[i] = 0
			}
		}
	}
}
