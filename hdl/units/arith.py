"""Arithmetic building blocks shared by the slices."""


def balanced_sum(terms):
    """The sum of ``terms`` (values) as a balanced adder tree: pairs added level by level,
    ``ceil(log2 n)`` adders deep; each add widens by a bit, so the sum is exact."""
    terms = list(terms)
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]
