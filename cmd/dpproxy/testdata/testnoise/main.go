// Command testnoise is built by TestShippedBinaryCannotSwitchNoiseOff: a
// program that is not a test binary and sets proxy.Options.TestNoise
// anyway. proxy.New must refuse it before reading the configuration.
package main

import (
	"context"
	"fmt"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/proxy"
)

func main() {
	_, err := proxy.New(context.Background(), nil, proxy.Options{TestNoise: func(m noise.Mechanism) noise.Mechanism { return m }})
	fmt.Println(err)
}
