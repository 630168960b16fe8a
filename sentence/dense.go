package sentence

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Dense is a Dense module: a linear layer and its activation,
//
//	y = f(W x + b)    W [Out, In], b [Out] (nil without bias)
//
// as 2_Dense/config.json (in_features, out_features, bias,
// activation_function) and its weights (linear.weight, linear.bias) say.
type Dense struct {
	In, Out int
	// Activation is the torch class sentence-transformers names
	// ("torch.nn.modules.activation.Tanh", its default); see Activations.
	Activation string
	Weight     []float32 // [Out, In], row-major as torch stores it
	Bias       []float32 // [Out], or nil
}

// DefaultActivation is the activation of a Dense module that does not
// name one (sentence-transformers' default).
const DefaultActivation = "torch.nn.modules.activation.Tanh"

// activations maps the class name (the last part of the torch path) to the
// function, computed in float64. Each is the torch module of that name with
// its default arguments.
var activations = map[string]func(float64) float64{
	"Identity":  func(x float64) float64 { return x },
	"Tanh":      math.Tanh,
	"ReLU":      func(x float64) float64 { return max(x, 0) },
	"Sigmoid":   func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	"GELU":      func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }, // exact (approximate="none")
	"SiLU":      func(x float64) float64 { return x / (1 + math.Exp(-x)) },
	"LeakyReLU": func(x float64) float64 { return max(x, 0.01*x) },
	"ELU": func(x float64) float64 {
		if x > 0 {
			return x
		}
		return math.Expm1(x)
	},
	"Softplus": func(x float64) float64 {
		if x > 20 { // torch's threshold
			return x
		}
		return math.Log1p(math.Exp(x))
	},
}

// Activations returns the activation class names Dense computes; the
// configuration may give them as torch.nn.NAME or with the module path
// (torch.nn.modules.activation.NAME, torch.nn.modules.linear.Identity).
func Activations() []string {
	names := make([]string, 0, len(activations))
	for n := range activations {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// activation returns the function the torch path names.
func activation(path string) (func(float64) float64, error) {
	if path == "" {
		path = DefaultActivation
	}
	name := path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		name = path[i+1:]
	}
	f, ok := activations[name]
	if !ok || !strings.HasPrefix(path, "torch.nn.") && path != name {
		return nil, fmt.Errorf("activation_function %q is not one this package computes (%s, as torch.nn classes)", path, strings.Join(Activations(), ", "))
	}
	return f, nil
}

// Check says whether d is whole: In and Out positive, Weight [Out, In],
// Bias [Out] or nil, a known activation.
func (d *Dense) Check() error {
	switch {
	case d.In <= 0 || d.Out <= 0:
		return fmt.Errorf("in_features %d and out_features %d must be positive", d.In, d.Out)
	case len(d.Weight) != d.In*d.Out:
		return fmt.Errorf("linear.weight has %d values, want out_features × in_features = %d × %d", len(d.Weight), d.Out, d.In)
	case d.Bias != nil && len(d.Bias) != d.Out:
		return fmt.Errorf("linear.bias has %d values, want out_features = %d", len(d.Bias), d.Out)
	}
	_, err := activation(d.Activation)
	return err
}

// Forward returns f(W x + b) [Out] for x [In], the sums in float64. d must
// pass Check.
func (d *Dense) Forward(x []float32) []float32 {
	if len(x) != d.In {
		panic(fmt.Sprintf("sentence: Dense.Forward: %d inputs, want in_features %d", len(x), d.In))
	}
	f, err := activation(d.Activation)
	if err != nil {
		panic("sentence: Dense.Forward on a module that fails Check: " + err.Error())
	}
	y := make([]float32, d.Out)
	for o := range y {
		w := d.Weight[o*d.In : o*d.In+d.In]
		s := 0.0
		if d.Bias != nil {
			s = float64(d.Bias[o])
		}
		for i, xi := range x {
			s += float64(w[i]) * float64(xi)
		}
		y[o] = float32(f(float64(float32(s))))
	}
	return y
}
