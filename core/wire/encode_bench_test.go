package wire

import "testing"

func benchWorkload(envs, cams, img, state int) (*Infer, *Feedback) {
	var obs Observation
	for c := 0; c < cams; c++ {
		obs.Images = append(obs.Images, NamedArray{Name: "cam" + string(rune('0'+c)), Array: Array{DType: Uint8, Shape: []int{envs, img, img, 3}, Data: make([]byte, envs*img*img*3)}})
	}
	obs.States = []NamedArray{{Name: "state", Array: Array{DType: Float64, Shape: []int{envs, state}, Data: make([]byte, 8*envs*state)}}}
	for i := 0; i < envs; i++ {
		obs.Text = append(obs.Text, "pick up the red block")
	}
	idx := make([]int64, envs)
	for i := range idx {
		idx[i] = int64(i)
	}
	z := make([]int64, envs)
	f := make([]bool, envs)
	return &Infer{EnvIndices: idx, StepIDs: z, Obs: &obs}, &Feedback{EnvIndices: idx, StepIDs: z, Obs: &obs, Rewards: make([]float32, envs), Terminated: f, Truncated: f}
}

// BenchmarkEncodeExchange encodes one exchange's infer and feedback for the
// bench workloads of ./build.sh bench (SMALL: 1 env, state 8; LARGE: 16
// envs, two 224x224x3 cameras, state 32; text on both).
func BenchmarkEncodeSmall(b *testing.B) {
	in, fb := benchWorkload(1, 0, 0, 8)
	var mi, mf Message // one per kind, as the client keeps them
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = EncodeInfer(&mi, in)
		_ = EncodeFeedback(&mf, fb)
	}
}
func BenchmarkEncodeLarge(b *testing.B) {
	in, fb := benchWorkload(16, 2, 224, 32)
	var mi, mf Message // one per kind, as the client keeps them
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = EncodeInfer(&mi, in)
		_ = EncodeFeedback(&mf, fb)
	}
}
