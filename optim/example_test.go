package optim_test

import (
	"fmt"

	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
)

func ExampleAdamW() {
	w := tensor.NewParam("dense.weight", 2)
	b := tensor.NewParam("dense.bias", 2)
	copy(w.Data, []float32{1, -1})
	copy(w.Grad, []float32{0.5, -0.5})
	copy(b.Grad, []float32{1, 1})
	opt, err := optim.NewAdamW([]*tensor.Param{w, b}, optim.DefaultAdamWConfig(0.01))
	if err != nil {
		fmt.Println(err)
		return
	}
	sched := optim.Schedule{Kind: optim.Linear, PeakLR: 0.1, Warmup: 0, Total: 10}
	norm := optim.ClipGradNorm(opt.Params(), 1.0)
	opt.Step(sched.LR(0))
	fmt.Printf("grad norm %.4f, step %d\n", norm, opt.StepCount())
	fmt.Printf("weight %.4f %.4f\n", w.Data[0], w.Data[1])
	fmt.Printf("bias %.4f %.4f\n", b.Data[0], b.Data[1])
	// Output:
	// grad norm 1.5811, step 1
	// weight 0.8990 -0.8990
	// bias -0.1000 -0.1000
}

func ExampleSchedule() {
	s := optim.Schedule{Kind: optim.Cosine, PeakLR: 1e-3, Warmup: 100, Total: 1000}
	for _, step := range []int{0, 50, 100, 550, 1000} {
		fmt.Printf("%4d %.6f\n", step, s.LR(step))
	}
	// Output:
	//    0 0.000000
	//   50 0.000500
	//  100 0.001000
	//  550 0.000500
	// 1000 0.000000
}
