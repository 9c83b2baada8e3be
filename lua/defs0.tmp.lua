return {1}
