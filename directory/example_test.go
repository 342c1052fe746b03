package directory_test

import (
	"context"
	"fmt"

	"github.com/planexec/planexec/directory"
)

func Example() {
	dir, err := directory.New(
		directory.Card{Name: "Lingua", Description: "Translates documents.", URL: "https://lingua.example/a2a",
			Skills: []directory.Skill{{ID: "translate", Name: "Translate", Tags: []string{"german", "french"}}}},
		directory.Card{Name: "Concierge", Description: "Books restaurant tables.", URL: "https://concierge.example/a2a"},
	)
	if err != nil {
		panic(err)
	}
	found, err := dir.Search(context.Background(), "translate the contract into German", 3)
	if err != nil {
		panic(err)
	}
	for _, m := range found {
		fmt.Println(m.Card.Name, m.Card.URL)
	}
	// Output: Lingua https://lingua.example/a2a
}
