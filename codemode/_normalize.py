"""normalize_code: placeholder, replaced below."""


def normalize_code(text: str) -> str:
    return text
