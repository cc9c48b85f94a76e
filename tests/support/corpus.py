"""A small corpus the retriever unit tests and the every-retriever contract tests share."""

TEXTS = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France, completed in 1889.",
    "Photosynthesis converts light energy into chemical energy stored in glucose in plants.",
    "Mercury is a liquid metal at room temperature; its boiling point is 356.7 degrees Celsius.",
    "The Great Wall of China was built over centuries to protect against northern invasions.",
    "Python is a programming language known for readability and a large standard library.",
    "The Pacific Ocean is the largest and deepest of the Earth's five oceanic divisions.",
    "Mount Everest, on the border of Nepal and China, is the highest mountain above sea level.",
    "Honey bees communicate the location of flowers to their hive mates with a waggle dance.",
]
